// memgasProcessor inside a Mastra Agent's own loop (agent.generate with inputProcessors), the model the AI SDK's
// MockLanguageModelV3, which keeps every prompt it is given: the shared scenario of the Python adapters
// (tests/support/scenario.py) against a live memgas serve.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { Agent } from "@mastra/core/agent";
import { MockLanguageModelV3 } from "ai/test";

import { MemgasClient } from "../dist/index.js";
import { CONTEXT_HEADER, memgasProcessor } from "../dist/mastra.js";
import { startServer } from "./server.mjs";

const FACT = "My locker code is 4512.";
const QUESTION = "What is my locker code?";
const turns = ["Hi! I just joined the gym downtown.", FACT,
               ...Array.from({ length: 37 }, (_, i) => `Tell me fact number ${i + 3} about the ocean and its tides.`),
               QUESTION];

let served, client;
before(async () => { served = await startServer(); client = new MemgasClient({ baseUrl: served.baseUrl, apiKey: served.adminKey }); });
after(() => served?.stop());

const text = (prompt) => prompt.map((m) => `${m.role}: ${typeof m.content === "string" ? m.content
  : m.content.map((p) => p.text ?? "").join(" ")}`).join("\n");

async function conversation(userId, sessionId, said, window = 10) {
  const model = new MockLanguageModelV3({ doGenerate: async () => ({
    content: [{ type: "text", text: "Noted." }], finishReason: { unified: "stop", raw: "stop" },
    usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
             outputTokens: { total: 1, text: 1, reasoning: 0 } }, warnings: [] }) });
  const agent = new Agent({ id: "coach", name: "coach", instructions: "Answer briefly.", model,
                            inputProcessors: [memgasProcessor({ client, userId, sessionId, window })] });
  const messages = [];
  for (const said_ of said) {
    messages.push({ role: "user", content: said_ });
    const result = await agent.generate(messages);
    messages.push({ role: "assistant", content: result.text });
  }
  return model.doGenerateCalls.map((call) => call.prompt);
}

test("the shared scenario in a Mastra agent: a fact that left the window comes back, the question never recalls itself", async () => {
  const prompts = await conversation("ana", "chat-1", turns);
  const last = prompts.at(-1);
  const window = text(last.filter((m) => !(m.role === "system" && m.content.startsWith(CONTEXT_HEADER))));
  assert.ok(!window.includes("4512"), "the fact is still in the window: the scenario proves nothing");
  const every = text(last);
  assert.ok(every.includes(FACT), every);
  assert.equal(every.split(QUESTION).length - 1, 1, every);
  const kept = (await client.get("chat-1", { userId: "ana" })).messages.map((m) => m.content);
  assert.ok(kept.includes(FACT) && !kept.includes(QUESTION));
  assert.ok(text((await conversation("ana", "chat-2", [QUESTION])).at(-1)).includes(FACT));
  assert.ok(!text((await conversation("bo", "chat-3", [QUESTION])).at(-1)).includes("4512"));
  assert.throws(() => memgasProcessor({ client, userId: "ana", sessionId: "x", window: 0 }), /window/);
});
