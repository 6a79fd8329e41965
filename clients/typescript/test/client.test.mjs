// MemgasClient against a live `memgas serve` started here (test/server.mjs), with Node's own test runner.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { AuthError, DuplicateSessionError, InvalidInputError, MemgasClient, MemgasError, NotFoundError } from "../dist/index.js";
import { startServer } from "./server.mjs";

let served, baseUrl, adminKey, tenantKey;

before(async () => {
  served = await startServer();
  ({ baseUrl, adminKey, tenantKey } = served);
});

after(() => served?.stop());

test("add, append, search, context, get, list, delete round-trip with typed results", async () => {
  const mem = new MemgasClient({ baseUrl, apiKey: adminKey });
  const added = await mem.add([{ role: "user", content: "I hiked Mount Hood with Ann." }, { role: "assistant", content: "Great climb!" }],
                              { userId: "ana", sessionId: "hike", timestamp: new Date("2024-05-20T10:00:00Z"), agentId: "coach",
                                metadata: { trip: true } });
  assert.equal(added.session_id, "hike");
  assert.ok(added.units > 0);
  const batch = await mem.addMany([{ messages: "My cat Miso knocked over a plant.", sessionId: "cat", runId: "r1" },
                                   { messages: "I baked rye sourdough.", sessionId: "bread" }], { userId: "ana" });
  assert.deepEqual(batch.map((r) => r.session_id), ["cat", "bread"]);
  const appended = await mem.append("Ann wants to go again in autumn.", { userId: "ana", sessionId: "hike", returnContext: true });
  assert.equal(appended.created, false);
  assert.equal(appended.messages, 3);

  const hits = await mem.search("which mountain did I climb?", { userId: "ana", k: 2 });
  assert.equal(hits[0].session_id, "hike");
  assert.equal(hits[0].agent_id, "coach");
  assert.ok(hits[0].relevance > 0 && hits[0].turns.length > 0);
  const filtered = await mem.search("which mountain did I climb?", { userId: "ana", filters: { run_id: "r1" } });
  assert.deepEqual(filtered.map((h) => h.session_id), ["cat"]);
  const text = await mem.context("mountain", { userId: "ana", maxTokens: 200 });
  assert.match(text, /Mount Hood/);
  await mem.append("Always answer in metric units.", { userId: "ana", sessionId: "cat" });
  const profile = await mem.profile({ userId: "ana" });
  // the instructions (the learned detector may add a preference it reads in another session)
  assert.deepEqual(profile.filter((s) => s.kind === "instruction").map((s) => [s.kind, s.text, s.session_id, s.always]),
                   [["instruction", "Always answer in metric units.", "cat", true]]);
  assert.deepEqual(await mem.profile({ userId: "ana", excludeSessions: ["cat", "hike", "bread"] }), []);
  assert.deepEqual(await mem.profile({ userId: "ana", filters: { run_id: "r2" } }), []);
  assert.match(await mem.context("How tall is Everest?", { userId: "ana" }), /Always answer in metric units/);
  const course = await mem.timeline({ userId: "ana", topic: "climbing a mountain", until: new Date("2024-06-01T00:00:00Z") });
  assert.deepEqual(course.map((d) => [d.session_id, d.items.map((i) => [i.message, i.text])]),
                   [["hike", [[0, "I hiked Mount Hood with Ann."]]]]);
  assert.equal((await mem.timeline({ userId: "ana" })).length, 3);
  await mem.deleteMessage("cat", 1, { userId: "ana" });
  assert.deepEqual(await mem.search("anything", { userId: "nobody" }), []);

  const session = await mem.get("hike", { userId: "ana" });
  assert.equal(session.messages.length, 3);
  assert.deepEqual(session.metadata, { trip: true });
  const first = (await mem.list({ userId: "ana", limit: 2, order: "newest" })).sessions;
  const rest = (await mem.list({ userId: "ana", limit: 2, order: "newest", cursor: first.at(-1).cursor })).sessions;
  assert.equal(first.length + rest.length, 3);
  const page = await mem.list({ userId: "ana", limit: 2 });
  assert.ok(page.next_cursor);
  const users = await mem.users();
  assert.ok(users.some((u) => u.user_id === "ana" && u.sessions === 3));
  const changed = await mem.updateMessage("hike", 2, "Ann wants to go again next spring.", { userId: "ana" });
  assert.equal(changed.messages, 3);
  const units = await mem.units("hike", { userId: "ana" });
  assert.ok(units.units.length > 0);
  const graph = await mem.graph({ userId: "ana" });
  assert.equal(graph.sessions.length, 3);
  const stats = await mem.stats({ userId: "ana" });
  assert.equal(stats.sessions, 3);
  assert.deepEqual(await mem.delete(null, { userId: "ana", filters: { run_id: "r1" } }), { user_id: "ana", deleted_sessions: 1 });
  assert.deepEqual(await mem.delete("bread", { userId: "ana" }), { user_id: "ana", deleted_sessions: 1 });
  await mem.add("The door code is 7781.", { userId: "ana", sessionId: "brief", metadata: { expires_at: "2020-01-01" } });
  assert.equal(await mem.expire({ userId: "ana" }), 1);
  assert.equal(await mem.expire({ userId: "ana", before: new Date(Date.UTC(2000, 0, 1)) }), 0);
  assert.deepEqual(await mem.delete(null, { userId: "ana" }), { user_id: "ana", deleted_sessions: 1 });
  assert.equal(await mem.ready(), true);
});

test("errors are a MemgasError hierarchy carrying the status", async () => {
  const mem = new MemgasClient({ baseUrl, apiKey: adminKey });
  await mem.add("one note", { userId: "bo", sessionId: "n1" });
  await assert.rejects(mem.add("again", { userId: "bo", sessionId: "n1" }),
                       (e) => e instanceof DuplicateSessionError && e.status === 409 && e.code === "conflict");
  await assert.rejects(mem.get("missing", { userId: "bo" }), (e) => e instanceof NotFoundError && e.status === 404);
  await assert.rejects(mem.search("x", { userId: "bo", filters: { n: { $gt: "a" } } }),
                       (e) => e instanceof InvalidInputError && e.status === 400 && /filters\.n\.\$gt/.test(e.message));
  await assert.rejects(mem.search("x", { userId: "bo", k: 0 }), (e) => e instanceof InvalidInputError && e.status === 422);
  await assert.rejects(new MemgasClient({ baseUrl }).search("x", { userId: "bo" }),
                       (e) => e instanceof AuthError && e.status === 401 && e instanceof MemgasError);
  await assert.rejects(new MemgasClient({ baseUrl: "http://127.0.0.1:9", timeout: 5 }).health(), (e) => e instanceof MemgasError && e.status === 0);
});

test("a tenant key sees only its tenant, and experience routes answer", async () => {
  const admin = new MemgasClient({ baseUrl, apiKey: adminKey });
  const acme = new MemgasClient({ baseUrl, apiKey: tenantKey });
  await admin.add("The vault code is 7788.", { userId: "carl", sessionId: "secret" });
  assert.deepEqual(await acme.search("vault code", { userId: "carl" }), []);
  await acme.add("I like tea.", { userId: "carl", sessionId: "mine" });
  assert.deepEqual((await acme.list({ userId: "carl" })).sessions.map((s) => s.session_id), ["mine"]);
  const added = await acme.addPrinciple({ situation: "When the user is in a hurry", action: "answer in one line",
                                          avoid: "long preambles", reason: "they asked for speed" }, { agentId: "helper" });
  assert.equal(added.added, true);
  const matches = await acme.recallPrinciples("The user says: quick, I am in a hurry!", { agentId: "helper", minSimilarity: 0 });
  assert.equal(matches[0].principle.action, "answer in one line");
  assert.equal((await acme.principles({ agentId: "helper" })).length, 1);
  assert.deepEqual(await acme.templates({ agentId: "helper" }), []);
  const id = added.principle.id;
  assert.equal((await acme.principle(id, { agentId: "helper" })).id, id);
  assert.deepEqual(await acme.deletePrinciple(id, { agentId: "helper" }), { id, deleted: true });
});
