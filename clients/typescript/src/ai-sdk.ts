// The Vercel AI SDK: memgasMiddleware, a language model middleware (wrapLanguageModel) over MemgasClient.
//
// One middleware is one conversation (window.ts): before each model call the AI SDK hands it the prompt; the model
// reads the system messages and the latest `window` messages of the conversation as they are, and memgas's context
// for the rest joins the prompt as a system message.
import type { LanguageModelMiddleware } from "ai";

import { CONTEXT_HEADER, memgasWindow, type Said, type WindowOptions } from "./window.js";

export { CONTEXT_HEADER };
export type MemgasMiddlewareOptions = WindowOptions;

type PromptMessage = { role: string; content: unknown };

function said(message: PromptMessage): Said {
  const content = message.content;
  const text = typeof content === "string" ? content : !Array.isArray(content) ? "" : content
    .map((part: any) => (part?.type === "text" ? part.text : part?.type === "tool-call"
      ? `[tool call] ${part.toolName}(${JSON.stringify(part.input ?? {})})`
      : part?.type === "tool-result" ? JSON.stringify(part.output ?? "") : ""))
    .filter((t: string) => t && t.trim())
    .join("\n");
  return { role: message.role === "user" || message.role === "tool" ? message.role : "assistant", text };
}

/** A language model middleware that gives the model a window of the conversation and memgas's context for the rest
 * (see window.ts). Use it with `wrapLanguageModel({ model, middleware: memgasMiddleware({...}) })`. */
export function memgasMiddleware(options: MemgasMiddlewareOptions): LanguageModelMiddleware {
  const conversation = memgasWindow(options);
  return {
    specificationVersion: "v4",
    async transformParams({ params }) {
      const prompt = params.prompt as PromptMessage[];
      const system = prompt.filter((m) => m.role === "system" && !said(m).text.startsWith(CONTEXT_HEADER));
      const talk = prompt.filter((m) => m.role !== "system");
      const { start, context } = await conversation.read(talk.map(said));
      const memory = context ? [{ role: "system", content: context }] : [];
      return { ...params, prompt: [...system, ...memory, ...talk.slice(start)] as typeof params.prompt };
    },
  };
}
