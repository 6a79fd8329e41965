// The memgas inspector: plain JavaScript, no dependencies, nothing loaded from anywhere but this server.
// The API key lives in sessionStorage (this tab only) and travels as a Bearer header; no cookies are used.
// Every value from the API is put into the page as text (textContent), never as HTML.

const KEY = "memgas-key";
const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "style") Object.assign(el.style, v);
    else if (v !== null && v !== undefined && v !== false) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  return el;
}

function svg(tag, attrs = {}) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const key = sessionStorage.getItem(KEY);
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                       credentials: "omit", cache: "no-store" });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, data.error ? data.error.message : `HTTP ${response.status}`);
  return data;
}

const q = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null));
const seg = encodeURIComponent;
const when = (iso) => (iso ? iso.slice(0, 16).replace("T", " ") : "undated");

function show(...nodes) { view.replaceChildren(...nodes); }

function confirmDelete(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

function userTabs(user) {
  const u = seg(user);
  return h("p", { class: "tabs" },
    h("a", { href: `#/u/${u}` }, "sessions"), h("a", { href: `#/u/${u}/graph` }, "graph"),
    h("a", { href: `#/u/${u}/search` }, "search"), h("a", { href: `#/u/${u}/course` }, "course"),
    h("a", { href: `#/u/${u}/profile` }, "profile"),
    h("a", { href: `#/u/${u}/facts` }, "facts"));
}

// -- views --------------------------------------------------------------------------------------------------

async function users() {
  crumbs.replaceChildren();
  const data = await api("GET", "/v1/users");
  const rows = data.users.map((u) => h("tr", {}, h("td", {}, h("a", { href: `#/u/${seg(u.user_id)}` }, u.user_id)),
                                           h("td", {}, u.sessions)));
  show(h("h2", {}, "Users"),
       rows.length ? h("table", {}, h("tr", {}, h("th", {}, "user"), h("th", {}, "sessions")), rows)
                   : h("p", { class: "muted" }, "No memory stored for the users this key may see."),
       h("p", {}, h("a", { href: "#/experience" }, "Experience memory (templates and principles)")));
}

function timeline(sessions) {
  const dated = sessions.filter((s) => s.timestamp).map((s) => ({ s, t: Date.parse(s.timestamp) }));
  const width = 1000, height = 60, box = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", height });
  if (!dated.length) return box;
  const lo = Math.min(...dated.map((d) => d.t)), hi = Math.max(...dated.map((d) => d.t)), span = hi - lo || 1;
  box.append(svg("line", { x1: 10, x2: width - 10, y1: 30, y2: 30, stroke: "#cbd5e1" }));
  for (const { s, t } of dated) {
    const dot = svg("circle", { cx: 10 + ((t - lo) / span) * (width - 20), cy: 30,
                                r: Math.min(3 + Math.sqrt(s.messages), 12), fill: "#2f6fde", "fill-opacity": 0.5 });
    const title = svg("title", {});
    title.textContent = `${s.session_id} · ${when(s.timestamp)} · ${s.messages} message${s.messages === 1 ? "" : "s"}`;
    dot.append(title);
    box.append(dot);
  }
  return box;
}

async function sessions(user) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", user);
  const table = h("table", {}, h("tr", {}, ...["when", "session", "messages", "agent / run", "first user line"]
    .map((t) => h("th", {}, t))));
  const all = [];
  const more = h("button", {}, "more");
  const line = h("div");
  async function page(cursor) {
    const data = await api("GET", `/v1/sessions?${q({ user_id: user, order: "newest", limit: 100, cursor })}`);
    for (const s of data.sessions) {
      all.push(s);
      table.append(h("tr", { "data-session": s.session_id },
        h("td", {}, when(s.timestamp)),
        h("td", {}, h("a", { href: `#/u/${seg(user)}/s/${seg(s.session_id)}` }, s.session_id)),
        h("td", {}, `${s.messages} (${s.turns} turns)`),
        h("td", {}, [s.agent_id, s.run_id].filter(Boolean).join(" / ") || "—"),
        h("td", {}, s.preview)));
    }
    line.replaceChildren(timeline(all));
    more.hidden = !data.next_cursor;
    more.onclick = () => page(data.next_cursor).catch(fail);
  }
  show(h("h2", {}, `Sessions of ${user}`), userTabs(user), line, table, more);
  await page(undefined);
  if (!all.length) table.replaceWith(h("p", { class: "muted" }, "No memory stored for this user."));
}

async function session(user, sid) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / ", sid);
  const [s, inspect] = await Promise.all([
    api("GET", `/v1/sessions/${seg(sid)}?${q({ user_id: user })}`),
    api("GET", `/v1/inspect/units?${q({ user_id: user, session_id: sid })}`)]);
  const messages = s.messages.map((m, i) => h("div", { class: `msg ${m.role}` },
    h("span", { class: "role" }, m.name || m.role), m.content, " ",
    h("button", { class: "danger", title: "delete this message", on: { click: async () => {
      if (!(await confirmDelete(`Delete message ${i} of session ${sid}? Everything made of it is made again.`))) return;
      await api("DELETE", `/v1/messages/${i}?${q({ user_id: user, session_id: sid })}`);
      route();
    } } }, "delete")));
  const byGranularity = {};
  for (const u of inspect.units) (byGranularity[u.granularity] ||= []).push(u);
  const units = Object.entries(byGranularity).map(([g, list]) => h("div", {}, h("h3", {}, `${g} (${list.length})`),
    list.map((u) => h("div", { class: "unit" }, h("span", { class: "muted" }, `turns ${u.turn_start}–${u.turn_end - 1}`
      + (u.chunk ? ` · chunk ${u.chunk}` : "") + " · "), u.text))));
  const top = inspect.links.length ? inspect.links[0].weight : 1;
  const links = h("table", {}, h("tr", {}, h("th", {}, "associated session"), h("th", {}, "edges"),
                                  h("th", {}, "strength")),
    inspect.links.map((l) => h("tr", {}, h("td", {}, h("a", { href: `#/u/${seg(user)}/s/${seg(l.session_id)}` },
                                                        l.session_id)),
                                h("td", {}, l.edges),
                                h("td", {}, h("span", { class: "bar weight", style: { width: `${(80 * l.weight) / top}px` } }),
                                  ` ${l.weight.toFixed(3)} (closest ${l.max_weight.toFixed(3)})`))));
  const remove = h("button", { class: "danger", on: { click: async () => {
    if (!(await confirmDelete(`Delete session ${sid} with its units and edges? This cannot be undone.`))) return;
    await api("DELETE", `/v1/sessions/${seg(sid)}?${q({ user_id: user })}`);
    location.hash = `#/u/${seg(user)}`;
  } } }, "delete session");
  const meta = [s.agent_id && `agent ${s.agent_id}`, s.run_id && `run ${s.run_id}`].filter(Boolean).join(" · ");
  show(h("h2", {}, `Session ${sid}`), userTabs(user),
       h("p", { class: "muted" }, `${when(s.timestamp)}${meta ? " · " + meta : ""} · metadata ${JSON.stringify(s.metadata)} `, remove),
       h("div", { class: "grid" },
         h("section", {}, h("h3", {}, `Messages (${s.messages.length})`), messages),
         h("section", {}, h("h3", {}, `Association (${inspect.links.length} sessions)`), links,
           h("h3", {}, `Units (${inspect.units.length})`), units)));
}

async function graph(user) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / graph");
  const data = await api("GET", `/v1/inspect/graph?${q({ user_id: user, limit: 150 })}`);
  const width = 900, height = 600;
  const box = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", id: "graph" });
  const nodes = data.sessions.map((s, i) => ({ ...s, x: width / 2 + 200 * Math.cos(i), y: height / 2 + 200 * Math.sin(i),
                                               vx: 0, vy: 0 }));
  const index = new Map(nodes.map((n, i) => [n.session_id, i]));
  const links = data.links.slice(0, 600).map((l) => ({ ...l, a: index.get(l.source), b: index.get(l.target) }));
  const top = links.length ? links[0].weight : 1;
  for (let step = 0; step < 250; step++) {  // a small force layout: repulsion, springs on links, a pull to the centre
    for (const n of nodes) { n.vx *= 0.6; n.vy *= 0.6; n.vx += (width / 2 - n.x) * 0.002; n.vy += (height / 2 - n.y) * 0.002; }
    for (let i = 0; i < nodes.length; i++) for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i], b = nodes[j], dx = a.x - b.x, dy = a.y - b.y, d2 = Math.max(dx * dx + dy * dy, 25);
      const f = 150 / d2;
      a.vx += f * dx; a.vy += f * dy; b.vx -= f * dx; b.vy -= f * dy;
    }
    for (const l of links) {
      const a = nodes[l.a], b = nodes[l.b], dx = b.x - a.x, dy = b.y - a.y, d = Math.hypot(dx, dy) || 1;
      const f = 0.02 * (l.weight / top) * (d - 60) / d;
      a.vx += f * dx; a.vy += f * dy; b.vx -= f * dx; b.vy -= f * dy;
    }
    for (const n of nodes) { n.x = Math.min(width - 30, Math.max(30, n.x + n.vx)); n.y = Math.min(height - 20, Math.max(20, n.y + n.vy)); }
  }
  for (const l of links) box.append(svg("line", { x1: nodes[l.a].x, y1: nodes[l.a].y, x2: nodes[l.b].x, y2: nodes[l.b].y,
    stroke: "#0f9d58", "stroke-opacity": 0.25 + 0.6 * (l.weight / top), "stroke-width": 0.5 + 3 * (l.weight / top) }));
  // Labels for the sessions most associated with others (all of them in a small graph): the id, cut, and the day
  // (unless the id says it); a halo keeps them legible over the lines. Each takes the first free place of four
  // around its dot, the most associated first; one that finds none keeps only its hover title.
  const degree = new Map(nodes.map((n) => [n.session_id, 0]));
  for (const l of links) { degree.set(l.source, degree.get(l.source) + l.weight); degree.set(l.target, degree.get(l.target) + l.weight); }
  const radius = (n) => 4 + Math.min(Math.sqrt(n.messages), 8);
  const cut = (text, most) => (text.length > most ? text.slice(0, most - 1) + "…" : text);
  const taken = nodes.map((n) => ({ x0: n.x - radius(n), x1: n.x + radius(n), y0: n.y - radius(n), y1: n.y + radius(n) }));
  const free = (b) => b.x0 >= 0 && b.x1 <= width && b.y0 >= 0 && b.y1 <= height
    && taken.every((t) => b.x1 <= t.x0 || t.x1 <= b.x0 || b.y1 <= t.y0 || t.y1 <= b.y0);
  const labels = [];
  for (const n of [...nodes].sort((a, b) => degree.get(b.session_id) - degree.get(a.session_id)).slice(0, 40)) {
    const day = n.timestamp ? n.timestamp.slice(0, 10) : "";
    const text = cut(n.session_id, 24) + (day && !n.session_id.includes(day) ? ` · ${day}` : "");
    const w = 6.2 * text.length, r = radius(n);
    const places = [[n.x + r + 3, n.y + 4, "start"], [n.x - r - 3, n.y + 4, "end"], [n.x - w / 2, n.y - r - 4, "start"],
                    [n.x - w / 2, n.y + r + 12, "start"]];
    for (const [x, y, anchor] of places) {
      const x0 = anchor === "end" ? x - w : x, b = { x0, x1: x0 + w, y0: y - 10, y1: y + 3 };
      if (!free(b)) continue;
      taken.push(b);
      const label = svg("text", { x, y, class: "label", "text-anchor": anchor, "data-session": n.session_id });
      label.textContent = text;
      labels.push(label);
      break;
    }
  }
  for (const n of nodes) {
    const dot = svg("circle", { cx: n.x, cy: n.y, r: radius(n), fill: "#2f6fde", "data-session": n.session_id, class: "node" });
    const title = svg("title", {});
    title.textContent = `${n.session_id} · ${when(n.timestamp)} · ${n.preview}`;
    dot.append(title);
    dot.addEventListener("click", () => { location.hash = `#/u/${seg(user)}/s/${seg(n.session_id)}`; });
    box.append(dot);
  }
  box.append(...labels);
  show(h("h2", {}, `Association graph of ${user}`), userTabs(user),
       h("p", { class: "muted" }, `${nodes.length} newest of ${data.total_sessions} sessions, ${links.length} links`
         + ` (thicker: more association; named: the ${labels.length} most associated that fit). Click a session to open it.`), box);
}

function hitView(hit, n) {
  const best = Math.max(...hit.turns.map((t) => t.score));
  const weights = Object.entries(hit.weights).map(([c, w]) => h("span", { class: "badge" }, `${c} `,
    h("span", { class: "bar", style: { width: `${Math.round(60 * w)}px` } }), ` ${w.toFixed(2)}`));
  return h("div", { class: "hit", "data-session": hit.session_id },
    h("div", {}, h("strong", {}, `[${n}] `), h("a", { href: `#/u/${seg(hit.user)}/s/${seg(hit.session_id)}` }, hit.session_id),
      ` · ${when(hit.timestamp)} · relevance `, h("span", { class: "bar", style: { width: `${Math.round(100 * hit.relevance)}px` } }),
      ` ${hit.relevance.toFixed(3)} · score ${hit.score.toFixed(3)} · seed ${hit.seed_score.toFixed(3)}`,
      hit.via_association ? h("span", { class: "badge" }, "via association") : null,
      hit.agent_id ? h("span", { class: "badge" }, `agent ${hit.agent_id}`) : null),
    h("div", { class: "muted" }, "router weights: ", weights),
    Object.keys(hit.channels || {}).length ? h("div", { class: "muted channels" }, "evidence by channel: ",
      Object.entries(hit.channels).map(([c, v]) => h("span", { class: "badge" }, `${c} `,
        h("span", { class: "bar weight", style: { width: `${Math.round(40 * v)}px` } }), ` ${v.toFixed(2)}`))) : null,
    hit.turns.map((t) => h("div", { class: `turn${t.score === best ? " best" : ""}` },
      h("span", { class: "muted" }, `turn ${t.index} · ${t.score.toFixed(3)}\n`), t.text)));
}

async function search(user) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / search");
  const query = h("input", { id: "query", placeholder: "a question, as the agent would ask it", size: 60 });
  const k = h("input", { id: "k", type: "number", value: 5, min: 1, max: 1000, style: { width: "5rem" } });
  const filters = h("textarea", { id: "filters", placeholder: 'filters, JSON, e.g. {"agent_id": "planner"}' });
  const out = h("div", { id: "hits" });
  const budget = h("input", { id: "max-tokens", type: "number", value: 1000, min: 1, max: 100000, style: { width: "6rem" } });
  const asked = () => {
    const body = { user_id: user, query: query.value, k: Number(k.value) };
    if (filters.value.trim()) body.filters = JSON.parse(filters.value);
    return body;
  };
  const form = h("form", { on: { submit: async (event) => {
    event.preventDefault();
    try {
      const data = await api("POST", "/v1/search", asked());
      out.replaceChildren(data.hits.length ? h("p", { class: "muted" }, `${data.hits.length} hits`) : h("p", {}, "No hits."),
                          ...data.hits.map((hit, i) => hitView({ ...hit, user }, i + 1)));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
  } } }, query, " k ", k, " ", h("button", { type: "submit" }, "Search"), " ",
    h("button", { type: "button", id: "show-context", on: { click: async () => {
      try {  // what an agent would read for this question: the context block, within the budget
        const data = await api("POST", "/v1/context", { ...asked(), max_tokens: Number(budget.value) });
        out.replaceChildren(h("p", { class: "muted" }, `The context at ${budget.value} tokens`),
                            h("pre", { id: "context", class: "unit" }, data.context || "(nothing relevant)"));
      } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
    } } }, "Context"), " tokens ", budget, filters);
  show(h("h2", {}, `Search ${user}'s memory`), userTabs(user), form, out);
}

async function profile(user) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / profile");
  const data = await api("GET", `/v1/profile?${q({ user_id: user })}`);
  const rows = data.statements.map((st) => h("tr", {}, h("td", {}, st.always ? `${st.kind} (always)` : st.kind),
    h("td", {}, st.subject || ""),
    h("td", {}, st.who ? `${st.who}: ${st.text}` : st.text), h("td", {}, h("a", { href: `#/u/${seg(user)}/s/${seg(st.session_id)}` }, st.session_id),
                            ` #${st.message}`), h("td", {}, when(st.timestamp))));
  show(h("h2", {}, `Standing instructions and preferences of ${user}`), userTabs(user),
       rows.length ? h("table", { id: "profile" }, h("tr", {}, h("th", {}, "kind"), h("th", {}, "about"), h("th", {}, "what the user said"),
                                                       h("th", {}, "where"), h("th", {}, "when")), rows)
                   : h("p", { class: "muted" }, "No standing instructions or preferences."));
}

async function course(user) {  // each session's digest (Memory.timeline), or the items about one topic
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / course");
  const topic = h("input", { type: "text", id: "topic", placeholder: "a topic (empty: everything)", size: 40 });
  const out = h("div", { id: "course" });
  const load = async () => {
    const data = await api("GET", `/v1/timeline?${q({ user_id: user, topic: topic.value.trim() || undefined })}`);
    out.replaceChildren(...(data.sessions.length ? data.sessions.map((d) => h("section", {},
      h("h3", {}, h("a", { href: `#/u/${seg(user)}/s/${seg(d.session_id)}` }, d.session_id), ` · ${when(d.timestamp)}`),
      h("ol", {}, ...d.items.map((i) => h("li", {}, h("span", { class: "muted" }, `#${i.message} ${i.speaker}: `),
                                           i.text))))) : [h("p", { class: "muted" }, "Nothing about this topic.")]));
  };
  const form = h("form", { on: { submit: (event) => {
    event.preventDefault();
    load().catch((e) => out.replaceChildren(h("p", { class: "error" }, e.message)));
  } } }, topic, " ", h("button", { type: "submit" }, "Show"));
  show(h("h2", {}, `The course of ${user}'s conversations`), userTabs(user),
       h("p", { class: "muted" }, "What each session brought up, in order: a line of the message that opened each subject."),
       form, out);
  await load();
}

async function facts(user) {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ ", h("a", { href: `#/u/${seg(user)}` }, user), " / facts");
  let data;
  try { data = await api("GET", `/v1/facts?${q({ user_id: user, include_invalid: true })}`); }
  catch (e) { show(h("h2", {}, "Facts"), userTabs(user), h("p", { class: "muted" }, e.message)); return; }
  const times = data.facts.flatMap((f) => [f.valid_at, f.invalid_at]).filter(Boolean).map(Date.parse);
  const lo = Math.min(...times, Date.now()), hi = Math.max(...times, Date.now()), span = hi - lo || 1;
  const rows = data.facts.map((f) => {
    const start = f.valid_at ? Date.parse(f.valid_at) : lo, end = f.invalid_at ? Date.parse(f.invalid_at) : hi;
    const bar = h("span", { class: "bar weight", style: { marginLeft: `${(200 * (start - lo)) / span}px`,
                                                          width: `${Math.max(2, (200 * (end - start)) / span)}px` } });
    return h("tr", {}, h("td", {}, `${f.subject} ${f.relation} ${f.object}`),
             h("td", {}, `${when(f.valid_at)} → ${f.invalid_at ? when(f.invalid_at) : "now"}`), h("td", {}, bar));
  });
  show(h("h2", {}, `Facts of ${user}`), userTabs(user),
       rows.length ? h("table", {}, h("tr", {}, h("th", {}, "fact"), h("th", {}, "valid"), h("th", {}, "timeline")), rows)
                   : h("p", { class: "muted" }, "No facts."));
}

async function experience() {
  crumbs.replaceChildren(h("a", { href: "#/" }, "users"), "/ experience");
  const agent = h("input", { id: "agent", placeholder: "agent id" });
  const out = h("div");
  const form = h("form", { on: { submit: async (event) => {
    event.preventDefault();
    try {
      const [templates, principles] = await Promise.all([
        api("GET", `/v1/templates?${q({ agent_id: agent.value })}`), api("GET", `/v1/principles?${q({ agent_id: agent.value })}`)]);
      out.replaceChildren(h("div", {}, h("h3", {}, `Templates (${templates.templates.length})`),
        templates.templates.map((t) => h("div", { class: "unit" },
          `${t.task_type}: ${t.description}\n${t.steps.map((step, i) => `${i + 1}. ${step}`).join("\n")}`)),
        h("h3", {}, `Principles (${principles.principles.length})`),
        principles.principles.map((p) => h("div", { class: "unit" },
          `${p.situation}\n→ ${p.action}\navoid: ${p.avoid}\nbecause ${p.reason} (support ${p.support})`))));
    } catch (e) { out.replaceChildren(h("p", { class: "error" }, e.message)); }
  } } }, agent, " ", h("button", { type: "submit" }, "Show"));
  show(h("h2", {}, "Experience memory"), form, out);
}

// -- routing ------------------------------------------------------------------------------------------------

function fail(error) {
  const hint = error.status === 401 ? " Enter an API key above." : "";
  show(h("p", { class: "error", id: "error" }, `${error.message}.${hint}`));
}

// Views are rendered one at a time, in the order they were asked for: a slow view asked for earlier (the user list
// after a key is entered) never replaces one asked for later (a session opened meanwhile).
let rendering = Promise.resolve();
function route() {
  rendering = rendering.then(render);
  return rendering;
}

async function render() {  // never rejects: a failed view shows its error, and the next one still renders
  try {
    const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    if (!sessionStorage.getItem(KEY)) return show(h("p", { class: "muted" }, "Enter an API key above to inspect memory."));
    if (parts[0] === "u" && parts[1] && parts[2] === "s" && parts[3]) return await session(parts[1], parts.slice(3).join("/"));
    if (parts[0] === "u" && parts[1] && parts[2] === "graph") return await graph(parts[1]);
    if (parts[0] === "u" && parts[1] && parts[2] === "search") return await search(parts[1]);
    if (parts[0] === "u" && parts[1] && parts[2] === "facts") return await facts(parts[1]);
    if (parts[0] === "u" && parts[1] && parts[2] === "profile") return await profile(parts[1]);
    if (parts[0] === "u" && parts[1] && parts[2] === "course") return await course(parts[1]);
    if (parts[0] === "u" && parts[1]) return await sessions(parts[1]);
    if (parts[0] === "experience") return await experience();
    return await users();
  } catch (error) { fail(error); }
}

document.getElementById("keyform").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  if (input.value.trim()) sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  route();
});
document.getElementById("forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); route(); });
window.addEventListener("hashchange", route);
route();
