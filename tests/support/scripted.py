"""Scripted models for the OpenAI-protocol stub (:mod:`support.openai_stub`): each answers the prompts one
feature sends from a table, so a test knows what the model will say."""

from __future__ import annotations

import json
import re
from typing import Any


def qa_responder(body: dict[str, Any]) -> str:
    """Filter keeps the memories that mention Oslo or pottery; the answer names what they say; the judge
    says yes when the response contains the correct answer."""
    first, last = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "which memories answer" in first or "answer questions" in first:
        blocks = re.findall(r"^\[(\d+)\] [^\n]*\n(.*?)(?=\n\n\[|\n\nQuestion|\Z)", last, re.S | re.M)
        useful = [int(n) for n, text in blocks if "Oslo" in text or "pottery" in text]
        if "which memories answer" in first:
            return json.dumps({n: int(n) in useful for n, _ in blocks})
        said = " ".join(text for n, text in blocks if int(n) in useful)
        wanted = "pottery" if "class" in last else "Oslo"
        answer = wanted if wanted in said and "boat" not in last else "I don't know"
        return json.dumps({"answer": answer, "sources": useful})
    gold = re.search(r"(?:Correct Answer|Explanation): (.*?)\n\nModel Response: (.*?)\n\n", last, re.S)
    assert gold is not None
    return "Yes" if gold.group(1).lower() in gold.group(2).lower() else "No"


#: What the scripted model extracts from each user message (assistant messages state nothing).
FACTS = {
    "I live in Paris and my dog is called Rex.": [("user", "lives in", "Paris"), ("user", "has dog", "Rex")],
    "I moved to London last month, new flat!": [("user", "lives in", "London")],
    "Rex loves the parks here.": [("User", "has dog", "Rex."), ("Rex", "loves", "parks")],
    "I started a job at Acme as a nurse.": [("user", "works at", "Acme")],
    "My sister Anna lives in Berlin.": [("Anna", "is sister of", "user"), ("Anna", "lives in", "Berlin")],
    "Anna works at Siemens now.": [("Anna", "works at", "Siemens")],
    "Anna's husband Tom is a pilot.": [("Tom", "is married to", "Anna"), ("Tom", "works as", "pilot")],
}


def zep_responder(body: dict[str, Any]) -> str:
    """The scripted model: extraction from a table, and a judge that flags a second home as a contradiction."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You summarise"):
        names = user.split("ENTITIES: ", 1)[1].split("\n", 1)[0]
        return json.dumps({"summary": f"Family and work: {names}."})
    if system.startswith("You extract facts"):
        message = user.split("CURRENT MESSAGE:\n", 1)[1].split(": ", 1)[1]
        triples = FACTS.get(message, [])
        return json.dumps({"facts": [{"subject": s, "relation": r, "object": o} for s, r, o in triples]})
    existing, new = user.split("EXISTING FACTS:\n", 1)[1].split("\n\nNEW FACT:\n")
    homes = [int(line.split(".", 1)[0]) for line in existing.splitlines() if " lives in " in line]
    if " lives in " in new and homes:
        return json.dumps({"verdict": "contradiction", "ids": homes})
    return json.dumps({"verdict": "new", "ids": []})
