// The shared scenario of the adapters (tests/support/scenario.py), for the Node tests of the TypeScript adapters:
// a fact at turn 2, 37 turns of other talk, the question at turn 40.
export const FACT = "My locker code is 4512.";
export const QUESTION = "What is my locker code?";
export const turns = ["Hi! I just joined the gym downtown.", FACT,
                      ...Array.from({ length: 37 }, (_, i) => `Tell me fact number ${i + 3} about the ocean and its tides.`),
                      QUESTION];

/** A model prompt (AI SDK messages) as text, one `role: text` line per message. */
export const text = (prompt) => prompt.map((m) => `${m.role}: ${typeof m.content === "string" ? m.content
  : m.content.map((p) => p.text ?? "").join(" ")}`).join("\n");

/** The scenario's checks, given `conversation(userId, sessionId, said)` (the prompts the model received) and the
 * client of the server the adapter keeps memory in; returns the last prompt of the 40-turn conversation. */
export async function checkScenario(assert, conversation, client, header) {
  const last = (await conversation("ana", "chat-1", turns)).at(-1);
  const window = text(last.filter((m) => !(m.role === "system" && m.content.startsWith(header))));
  assert.ok(!window.includes("4512"), "the fact is still in the window: the scenario proves nothing");
  const every = text(last);
  assert.ok(every.includes(FACT), every);
  assert.equal(every.split(QUESTION).length - 1, 1, every);
  const kept = (await client.get("chat-1", { userId: "ana" })).messages.map((m) => m.content);
  assert.ok(kept.includes(FACT) && !kept.includes(QUESTION));
  assert.ok(text((await conversation("ana", "chat-2", [QUESTION])).at(-1)).includes(FACT));
  assert.ok(!text((await conversation("bo", "chat-3", [QUESTION])).at(-1)).includes("4512"));
  return every;
}
