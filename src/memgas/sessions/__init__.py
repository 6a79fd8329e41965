"""What the facades read about a user's sessions beside the ranking: the header catalogue, listing orders and page
cursors (:mod:`memgas.sessions.listing`), and the inspector's views of units, association and the session graph
(:mod:`memgas.sessions.inspector`)."""
