// The Python that has memgas, for the generator and the tests: $MEMGAS_PYTHON when set, else the project's own
// virtual environment (../../.venv, made by the README's set-up command) when it exists, else python3.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const project = dirname(dirname(dirname(dirname(fileURLToPath(import.meta.url)))));
const venv = process.platform === "win32" ? join(project, ".venv", "Scripts", "python.exe") : join(project, ".venv", "bin", "python");

export const python = process.env.MEMGAS_PYTHON || (existsSync(venv) ? venv : "python3");
