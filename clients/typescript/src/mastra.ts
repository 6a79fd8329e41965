// Mastra: memgasProcessor, an input processor for a Mastra Agent (`inputProcessors: [...]`) over MemgasClient.
//
// What maps to what: one processor is one conversation, the memgas session `sessionId` of `userId`. Before the model
// runs, Mastra hands it the conversation's messages and its system messages; the model reads the latest `window`
// messages as they are, the messages that fell out of them are appended to the memgas session (once: the processor
// counts what the session holds), and memgas's context for the latest user message joins the system messages. The
// memgas session holds only what left the window, so the context recalls it (and every other conversation of the
// user) but never the message being answered.
import type { Processor } from "@mastra/core/processors";

import { MemgasClient, NotFoundError } from "./index.js";

/** The first line of the system message that carries memgas's context. */
export const CONTEXT_HEADER = "Long-term memory (memgas), from earlier in this and other conversations:";

export interface MemgasProcessorOptions {
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

type Stored = { role: "user" | "assistant"; content: string };

/** The text of a Mastra message (its text parts, or its plain content). */
function textOf(message: any): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  const parts = Array.isArray(content?.parts) ? content.parts : Array.isArray(content) ? content : [];
  const texts = parts.filter((p: any) => p?.type === "text" && typeof p.text === "string").map((p: any) => p.text);
  return texts.length ? texts.join("\n") : typeof content?.content === "string" ? content.content : "";
}

function stored(message: any): Stored | null {
  const content = textOf(message);
  if (!content.trim() || (message.role !== "user" && message.role !== "assistant")) return null;
  return { role: message.role, content };
}

/** An input processor that gives the model a window of the conversation and memgas's context for the rest (see the
 * module comment). */
export function memgasProcessor(options: MemgasProcessorOptions): Processor<"memgas"> {
  const window = options.window ?? 20;
  if (!Number.isInteger(window) || window < 1) throw new Error("window must be at least 1 message");
  let kept: number | undefined; // how many of the conversation's messages the memgas session holds
  return {
    id: "memgas",
    name: "memgas long-term memory",
    async processInput({ messages, systemMessages }) {
      let start = Math.max(0, messages.length - window);
      while (start > 0 && messages[start].role !== "user") start -= 1;
      const left = messages.slice(0, start).map(stored).filter((m): m is Stored => m !== null);
      if (kept === undefined) {
        kept = await options.client.get(options.sessionId, { userId: options.userId })
          .then((s) => s.messages.length, (e) => { if (e instanceof NotFoundError) return 0; throw e; });
      }
      if (left.length > kept) {
        await options.client.append(left.slice(kept), { userId: options.userId, sessionId: options.sessionId });
        kept = left.length;
      }
      const windowed = messages.slice(start);
      const asked = windowed.filter((m) => m.role === "user").map(textOf).filter((t) => t.trim()).at(-1);
      const text = asked ? await options.client.context(asked.slice(0, 10_000), { userId: options.userId,
        k: options.k ?? 5, maxTokens: options.maxTokens ?? 800 }) : "";
      const memory = text ? [{ role: "system" as const, content: `${CONTEXT_HEADER}\n${text}` }] : [];
      return { messages: windowed, systemMessages: [...systemMessages, ...memory] };
    },
  };
}
