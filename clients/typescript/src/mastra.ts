// Mastra: memgasProcessor, an input processor for a Mastra Agent (`inputProcessors: [...]`) over MemgasClient.
//
// One processor is one conversation (window.ts): before the model runs, Mastra hands it the conversation's messages
// and its system messages; the model reads the latest `window` messages as they are, and memgas's context for the
// rest joins the system messages.
import type { Processor } from "@mastra/core/processors";

import { CONTEXT_HEADER, memgasWindow, type Said, type WindowOptions } from "./window.js";

export { CONTEXT_HEADER };
export type MemgasProcessorOptions = WindowOptions;

/** A Mastra message as the window reads it: its text parts, or its plain content. */
function said(message: any): Said {
  const content = message?.content;
  const parts = Array.isArray(content?.parts) ? content.parts : Array.isArray(content) ? content : [];
  const texts = parts.filter((p: any) => p?.type === "text" && typeof p.text === "string").map((p: any) => p.text);
  const text = typeof content === "string" ? content
    : texts.length ? texts.join("\n") : typeof content?.content === "string" ? content.content : "";
  // only what the user and the assistant said is kept (a tool message of Mastra's stays out, as it always has)
  return { role: message.role === "user" || message.role === "assistant" ? message.role : "other", text };
}

/** An input processor that gives the model a window of the conversation and memgas's context for the rest (see
 * window.ts). */
export function memgasProcessor(options: MemgasProcessorOptions): Processor<"memgas"> {
  const conversation = memgasWindow(options);
  return {
    id: "memgas",
    name: "memgas long-term memory",
    async processInput({ messages, systemMessages }) {
      const { start, context } = await conversation.read(messages.map(said));
      const memory = context ? [{ role: "system" as const, content: context }] : [];
      return { messages: messages.slice(start), systemMessages: [...systemMessages, ...memory] };
    },
  };
}
