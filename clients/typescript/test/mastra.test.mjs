// memgasProcessor inside a Mastra Agent's own loop (agent.generate with inputProcessors), the model the AI SDK's
// MockLanguageModelV3, which keeps every prompt it is given: the shared scenario of the Python adapters
// (tests/support/scenario.py) against a live memgas serve.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { Agent } from "@mastra/core/agent";
import { MockLanguageModelV3 } from "ai/test";

import { MemgasClient } from "../dist/index.js";
import { CONTEXT_HEADER, memgasProcessor } from "../dist/mastra.js";
import { checkScenario } from "./scenario.mjs";
import { startServer } from "./server.mjs";

let served, client;
before(async () => { served = await startServer(); client = new MemgasClient({ baseUrl: served.baseUrl, apiKey: served.adminKey }); });
after(() => served?.stop());

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
  await checkScenario(assert, conversation, client, CONTEXT_HEADER);
  assert.throws(() => memgasProcessor({ client, userId: "ana", sessionId: "x", window: 0 }), /window/);
});
