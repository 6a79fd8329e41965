import { MemgasClient, NotFoundError } from "memgas-client";

const mem = new MemgasClient({
  baseUrl: process.env.MEMGAS_URL ?? "http://127.0.0.1:8000",
  apiKey: process.env.MEMGAS_API_KEY,              // from `memgas keys create`
});
await mem.append([{ role: "user", content: "My locker code is 4512." }], { userId: "ana", sessionId: "gym" });
await mem.append("I switched to the evening yoga class.", { userId: "ana", sessionId: "gym" });

const hits = await mem.search("what is my locker code?", { userId: "ana", k: 3 });
console.log(hits[0].session_id, hits[0].turns[0].text);
const text = await mem.context("which class do I go to?", { userId: "ana", maxTokens: 500 });
console.log(text);
const page = await mem.list({ userId: "ana", limit: 20, order: "newest" });   // page.next_cursor: the next page
console.log(page.sessions.map((s) => s.session_id));
await mem.get("no-such-chat", { userId: "ana" }).catch((e) => { if (e instanceof NotFoundError) console.log("not found:", e.status); });
await mem.delete("gym", { userId: "ana" });
