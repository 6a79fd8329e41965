// A live `memgas serve` for the Node tests: a new store in a temporary folder, a free loopback port, an admin and a
// tenant key. The Python that has memgas: scripts/python.mjs ($MEMGAS_PYTHON, else the project's .venv, else python3).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { MemgasClient } from "../dist/index.js";
import { python } from "../scripts/python.mjs";

const freePort = () => new Promise((resolve) => {
  const probe = createServer().listen(0, "127.0.0.1", () => { const { port } = probe.address(); probe.close(() => resolve(port)); });
});

function key(db, scope) {
  const out = execFileSync(python, ["-m", "memgas.cli", "keys", "create", "--db", db, "--create", "--scope", scope], { encoding: "utf8" });
  return JSON.parse(out).key;
}

/** Start a server; resolves to { baseUrl, adminKey, tenantKey, stop() } once it answers. */
export async function startServer() {
  const folder = mkdtempSync(join(tmpdir(), "memgas-ts-"));
  const db = join(folder, "memory.db");
  const adminKey = key(db, "admin");
  const tenantKey = key(db, "tenant:acme");
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const server = spawn(python, ["-m", "memgas.cli", "serve", "--db", db, "--port", String(port)],
                       { stdio: "ignore", env: { ...process.env, MEMGAS_CACHE_DIR: join(folder, "cache") } });
  const stop = () => { server.kill(); rmSync(folder, { recursive: true, force: true }); };
  const client = new MemgasClient({ baseUrl });
  for (let i = 0; i < 600; i++) {
    try { if ((await client.health()).status === "ok") return { baseUrl, adminKey, tenantKey, stop }; } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  stop();
  throw new Error("memgas serve did not start");
}
