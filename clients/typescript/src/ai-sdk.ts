// The Vercel AI SDK: memgasMiddleware, a language model middleware (wrapLanguageModel) over MemgasClient.
//
// What maps to what: one middleware is one conversation, the memgas session `sessionId` of `userId`. Before each model
// call the AI SDK hands it the prompt; the model reads the latest `window` messages of the conversation (starting at a
// user message) and the system messages as they are; the messages that fell out of the window are appended to the
// memgas session (once: the middleware counts what the session holds), and memgas's context for the latest user
// message joins the prompt as a system message. The memgas session holds only what left the window, so the context
// recalls it (and every other conversation of the user) but never the message being answered.
import type { LanguageModelMiddleware } from "ai";

import { MemgasClient, NotFoundError } from "./index.js";

/** The first line of the system message that carries memgas's context. */
export const CONTEXT_HEADER = "Long-term memory (memgas), from earlier in this and other conversations:";

export interface MemgasMiddlewareOptions {
  /** The memgas server's client. */
  client: MemgasClient;
  /** Whose memory. */
  userId: string;
  /** The memgas session this conversation's older messages are kept in. */
  sessionId: string;
  /** How many of the latest messages the model reads as they are (default 20). */
  window?: number;
  /** Sessions the context draws on (default 5). */
  k?: number;
  /** The context's budget, 4 characters a token (default 800). */
  maxTokens?: number;
}

type PromptMessage = { role: string; content: unknown };

function textOf(message: PromptMessage): string {
  if (typeof message.content === "string") return message.content;
  if (!Array.isArray(message.content)) return "";
  return message.content
    .map((part: any) => (part?.type === "text" ? part.text : part?.type === "tool-call"
      ? `[tool call] ${part.toolName}(${JSON.stringify(part.input ?? {})})`
      : part?.type === "tool-result" ? JSON.stringify(part.output ?? "") : ""))
    .filter((t: string) => t && t.trim())
    .join("\n");
}

function stored(message: PromptMessage): { role: "user" | "assistant" | "tool"; content: string } | null {
  const content = textOf(message);
  if (!content.trim()) return null;
  const role = message.role === "user" ? "user" : message.role === "tool" ? "tool" : "assistant";
  return { role, content };
}

/** A language model middleware that gives the model a window of the conversation and memgas's context for the rest
 * (see the module comment). Use it with `wrapLanguageModel({ model, middleware: memgasMiddleware({...}) })`. */
export function memgasMiddleware(options: MemgasMiddlewareOptions): LanguageModelMiddleware {
  const window = options.window ?? 20;
  if (!Number.isInteger(window) || window < 1) throw new Error("window must be at least 1 message");
  let kept: number | undefined; // how many of the conversation's messages the memgas session holds
  return {
    specificationVersion: "v4",
    async transformParams({ params }) {
      const prompt = params.prompt as PromptMessage[];
      const system = prompt.filter((m) => m.role === "system" && !textOf(m).startsWith(CONTEXT_HEADER));
      const talk = prompt.filter((m) => m.role !== "system");
      let start = Math.max(0, talk.length - window);
      while (start > 0 && talk[start].role !== "user") start -= 1;
      const left = talk.slice(0, start).map(stored).filter((m) => m !== null);
      if (kept === undefined) {
        kept = await options.client.get(options.sessionId, { userId: options.userId })
          .then((s) => s.messages.length, (e) => { if (e instanceof NotFoundError) return 0; throw e; });
      }
      if (left.length > kept) {
        await options.client.append(left.slice(kept), { userId: options.userId, sessionId: options.sessionId });
        kept = left.length;
      }
      const windowed = talk.slice(start);
      const asked = windowed.filter((m) => m.role === "user").map(textOf).filter((t) => t.trim()).at(-1);
      const text = asked ? await options.client.context(asked.slice(0, 10_000), { userId: options.userId,
        k: options.k ?? 5, maxTokens: options.maxTokens ?? 800 }) : "";
      const memory = text ? [{ role: "system", content: `${CONTEXT_HEADER}\n${text}` }] : [];
      return { ...params, prompt: [...system, ...memory, ...windowed] as typeof params.prompt };
    },
  };
}
