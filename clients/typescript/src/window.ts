// What the framework adapters (ai-sdk.ts, mastra.ts) share: one conversation, the memgas session `sessionId` of
// `userId`, read by the model through a window of its latest messages. The messages that fall out of the window are
// appended to the memgas session (once: the window counts what the session holds), and memgas's context for the
// latest user message stands for them. The session holds only what left the window, so the context recalls it (and
// every other conversation of the user) but never the message being answered.
import { MemgasClient, NotFoundError } from "./index.js";

/** The first line of the system message that carries memgas's context. */
export const CONTEXT_HEADER = "Long-term memory (memgas), from earlier in this and other conversations:";

export interface WindowOptions {
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

/** A framework's message as the window reads it: its role and its text (from the framework's own shape). */
export interface Said { role: string; text: string }

/** One conversation's window (see the module comment); `read(messages)` is called before each model call. */
export function memgasWindow(options: WindowOptions) {
  const window = options.window ?? 20;
  if (!Number.isInteger(window) || window < 1) throw new Error("window must be at least 1 message");
  let kept: number | undefined; // how many of the conversation's messages the memgas session holds
  return {
    /** Where the window starts in `messages` (moved back to a user message), and memgas's context for it
     * (`""` for none), once what fell out of the window is stored. */
    async read(messages: Said[]): Promise<{ start: number; context: string }> {
      let start = Math.max(0, messages.length - window);
      while (start > 0 && messages[start].role !== "user") start -= 1;
      const left = messages.slice(0, start)
        .filter((m) => (m.role === "user" || m.role === "assistant" || m.role === "tool") && m.text.trim())
        .map((m) => ({ role: m.role as "user" | "assistant" | "tool", content: m.text }));
      if (kept === undefined) {
        kept = await options.client.get(options.sessionId, { userId: options.userId })
          .then((s) => s.messages.length, (e) => { if (e instanceof NotFoundError) return 0; throw e; });
      }
      if (left.length > kept) {
        await options.client.append(left.slice(kept), { userId: options.userId, sessionId: options.sessionId });
        kept = left.length;
      }
      const asked = messages.slice(start).filter((m) => m.role === "user" && m.text.trim()).at(-1)?.text;
      const text = asked ? await options.client.context(asked.slice(0, 10_000), { userId: options.userId,
        k: options.k ?? 5, maxTokens: options.maxTokens ?? 800 }) : "";
      return { start, context: text ? `${CONTEXT_HEADER}\n${text}` : "" };
    },
  };
}
