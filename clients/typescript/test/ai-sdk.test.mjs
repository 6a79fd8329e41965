// memgasMiddleware inside the Vercel AI SDK's own loop (generateText over wrapLanguageModel), the model the SDK's
// MockLanguageModelV4, which keeps every prompt it is given: the shared scenario of the Python adapters
// (tests/support/scenario.py) against a live memgas serve.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { generateText, wrapLanguageModel } from "ai";
import { MockLanguageModelV4 } from "ai/test";

import { CONTEXT_HEADER, memgasMiddleware } from "../dist/ai-sdk.js";
import { MemgasClient } from "../dist/index.js";
import { checkScenario } from "./scenario.mjs";
import { startServer } from "./server.mjs";

let served, client;
before(async () => { served = await startServer(); client = new MemgasClient({ baseUrl: served.baseUrl, apiKey: served.adminKey }); });
after(() => served?.stop());

async function conversation(userId, sessionId, said, window = 10) {
  const model = new MockLanguageModelV4({ doGenerate: async () => ({
    content: [{ type: "text", text: "Noted." }], finishReason: { unified: "stop", raw: "stop" },
    usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } }, warnings: [] }) });
  const wrapped = wrapLanguageModel({ model, middleware: memgasMiddleware({ client, userId, sessionId, window }) });
  const messages = [];
  for (const said_ of said) {
    messages.push({ role: "user", content: said_ });
    const result = await generateText({ model: wrapped, system: "Answer briefly.", messages });
    messages.push({ role: "assistant", content: result.text });
  }
  return model.doGenerateCalls.map((call) => call.prompt);
}

test("the shared scenario: a fact that left the window comes back, the question never recalls itself", async () => {
  const every = await checkScenario(assert, conversation, client, CONTEXT_HEADER);
  assert.ok(every.startsWith("system: Answer briefly."));  // the app's own system message stays first
  assert.throws(() => memgasMiddleware({ client, userId: "ana", sessionId: "x", window: 0 }), /window/);
});
