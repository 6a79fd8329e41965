// The client's types: the server's schemas (src/schema.ts, generated) under their client names, and the few of its
// own. Both the generated declaration of the calls (src/api.ts) and the client (src/index.ts) import them from here.
import type { components } from "./schema.js";

type Schemas = components["schemas"];
export type Hit = Schemas["HitOut"];
export type Turn = Schemas["TurnOut"];
export type AddResult = Schemas["AddResult"];
export type AppendResult = Schemas["AppendResult"];
export type MessageChange = Schemas["MessageChange"];
export type Session = Schemas["SessionOut"];
export type SessionHeader = Schemas["SessionHeader"];
export type SessionPage = Schemas["SessionList"];
export type DeleteResult = Schemas["DeleteResult"];
export type UserRow = Schemas["UserRow"];
export type Answer = Schemas["AnswerOut"];
export type Fact = Schemas["FactOut"];
export type Community = Schemas["CommunityOut"];
export type StandingStatement = Schemas["StandingOut"];
export type SessionDigest = Schemas["SessionDigestOut"];
export type DigestItem = Schemas["DigestItemOut"];
export type Template = Schemas["TemplateOut"];
export type TemplateMatch = Schemas["TemplateMatch"];
export type TemplateSolved = Schemas["TemplateSolved"];
export type TemplateLearned = Schemas["TemplateLearned"];
export type Principle = Schemas["PrincipleOut"];
export type PrincipleAdded = Schemas["PrincipleAdded"];
export type PrincipleMatch = Schemas["PrincipleMatch"];
export type ItemDeleted = Schemas["ItemDeleted"];
/** A message as memgas takes it: its own shape, or an OpenAI or Anthropic chat message. */
export type Message = Schemas["MessageIn"];
/** One session of `addMany`. */
export type SessionInput = { messages: Message[] | string; sessionId?: string; timestamp?: Timestamp;
  metadata?: Record<string, unknown>; agentId?: string; runId?: string };
/** A filter (README, "Scopes and filters"): `{field: value}`, `{field: {$in: [...]}}`, `$and`, `$or`, `$not`. */
export type Filters = Record<string, unknown>;
export type Timestamp = string | Date;
