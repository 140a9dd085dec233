/* The Tess drawer on every admin page: sessions, the conversation, the live output, cards.

The server is the truth. On load and on every session switch the drawer reads the selected session, its
cards, approvals and hand-offs from the REST API, the last screenful of its stream (?tail=) and, for a
terminal, its screen now (…/screen/); the websocket then resumes from that tail's seq, and live events apply
on top by id, never moving an item back (a reload or a late message cannot resurrect a decided card).
"Load earlier" pages back with ?before=.

Hooks other scripts may use (window.Tess):
  Tess.openSession(id)    open the drawer on that session (the fleet board's "open in the drawer")
  Tess.selectSession(id)  switch the drawer's session without opening it
  Tess.systemLine(text)   a line of the drawer's own in the conversation
  Tess.cardFor(kind, id, title), Tess.settleCard(card)   a card, and moving it to the history once decided
  Tess.onStart, Tess.onMeEvent   listeners: the drawer started; an event of /ws/me/
  Tess.markdown(text), Tess.richText(text)   safe rendering of model text (DOM nodes, never innerHTML)
  Tess.terminal           the live output's xterm.js Terminal (read its buffer; tests do) */
(function () {
  "use strict";
  const { api, el, plural } = window.Tess;
  const OPEN_KEY = "tess.drawer.open";
  const SESSION_KEY = "tess.drawer.session";
  const TAIL = 200; // events: more than the output panel shows, few enough to read at once
  const HISTORY_SHOWN = 10;
  const CHIP = { profile: "Memory: Operator profile", session: "Memory: Session only" };
  const ENDED = new Set(["exited", "terminated"]);
  const AGENT = {
    working: "working",
    waiting_for_input: "waiting for input",
    idle: "idle",
    error: "error",
    ended: "ended",
    unknown: "unknown",
  };

  const root = document.getElementById("tess-root");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const toggle = $("tess-toggle");
  const drawer = $("tess-drawer");
  const picker = $("tess-session");
  const conversation = $("tess-conversation");
  const form = $("tess-form");
  const input = $("tess-input");
  const output = $("tess-output");
  const newOutput = $("tess-new-output");
  const loadEarlierButton = $("tess-load-earlier");
  const interactiveButton = $("tess-interactive");
  const connection = $("tess-connection");
  const sessionState = $("tess-session-state");
  const sessionUsage = $("tess-session-usage");
  const cards = $("tess-cards");
  const cardsEmpty = $("tess-cards-empty");
  const history = $("tess-card-history");
  const historyList = $("tess-card-history-list");
  const chip = $("tess-memory-chip");

  const state = {
    me: "",
    sessionId: "",
    session: null,
    lastSeq: 0,
    prevCursor: null,
    seen: new Set(),
    socket: null,
    retry: 0,
    timer: null,
    generation: 0,
    replaying: false,
  };
  const sessionsById = new Map();

  // --- text: ids, times and Markdown, always as DOM nodes -------------------------------------------------

  const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
  const ISO = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})/g;
  const CLOCK = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const DAY_CLOCK = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });

  function relative(date) {
    const minutes = Math.round((Date.now() - date.getTime()) / 60000);
    if (Math.abs(minutes) < 1) return "just now";
    const format = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
    if (Math.abs(minutes) < 60) return format.format(-minutes, "minute");
    if (Math.abs(minutes) < 48 * 60) return format.format(-Math.round(minutes / 60), "hour");
    return format.format(-Math.round(minutes / 1440), "day");
  }

  /* "10:42" (a date first when not today), the full time and how long ago in its tooltip. */
  function timeNode(value) {
    const date = new Date(value);
    if (Number.isNaN(date.getTime())) return document.createTextNode(String(value));
    const today = date.toDateString() === new Date().toDateString();
    return el("time", {
      class: "tess-time",
      datetime: date.toISOString(),
      title: FULL.format(date) + " (" + relative(date) + ")",
      text: (today ? CLOCK : DAY_CLOCK).format(date),
    });
  }

  /* The first 8 characters of an id; a click copies the whole id. */
  function shortId(id) {
    const button = el("button", {
      type: "button",
      class: "tess-id",
      title: "Copy the full id " + id,
      "aria-label": "Copy the id " + id.slice(0, 8),
      "data-id": id,
      text: id.slice(0, 8),
    });
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(id);
        button.dataset.copied = "1";
        button.title = "Copied " + id;
      } catch (error) {
        button.title = id; // no clipboard here: at least the tooltip shows it in full
      }
    });
    return button;
  }

  /* "16:45 UTC" as the server writes a time within the day: the nearest such moment, in local time. */
  function utcClock(hours, minutes) {
    const now = new Date();
    const at = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), hours, minutes));
    const halfDay = 12 * 3600 * 1000;
    if (at - now > halfDay) at.setUTCDate(at.getUTCDate() - 1);
    else if (now - at > halfDay) at.setUTCDate(at.getUTCDate() + 1);
    return at.toISOString();
  }

  /* Plain text with every UUID shortened and every timestamp in local time. */
  function richText(text) {
    text = String(text);
    const nodes = [];
    const pattern = new RegExp(UUID.source + "|" + ISO.source + "|\\b([01]\\d|2[0-3]):([0-5]\\d) UTC\\b", "gi");
    let last = 0;
    for (const match of text.matchAll(pattern)) {
      if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
      if (match[1] !== undefined) nodes.push(timeNode(utcClock(Number(match[1]), Number(match[2]))));
      else if (/^\d{4}-\d{2}-\d{2}T/.test(match[0])) nodes.push(timeNode(match[0]));
      else nodes.push(shortId(match[0]));
      last = match.index + match[0].length;
    }
    if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
    return nodes;
  }

  function safeUrl(raw) {
    try {
      const url = new URL(raw, location.origin);
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch (error) {
      return null;
    }
  }

  const INLINE = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|(?<![\w*])\*([^*\s][^*\n]*?)\*(?![\w*])|(?<!\w)_([^_\s][^_\n]*?)_(?!\w)|\[([^\]\n]+)\]\(([^)\s]+)\)/g;

  function inline(text) {
    const nodes = [];
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      if (match.index > last) nodes.push(...richText(text.slice(last, match.index)));
      const [whole, code, strong, star, under, label, href] = match;
      if (code !== undefined) nodes.push(el("code", { text: code }));
      else if (strong !== undefined) nodes.push(el("strong", {}, ...richText(strong)));
      else if (star !== undefined || under !== undefined) nodes.push(el("em", {}, ...richText(star ?? under)));
      else {
        const url = safeUrl(href);
        nodes.push(url ? el("a", { href: url, rel: "noopener noreferrer", target: "_blank", text: label }) : document.createTextNode(whole));
      }
      last = match.index + whole.length;
    }
    if (last < text.length) nodes.push(...richText(text.slice(last)));
    return nodes;
  }

  /* A small, safe Markdown: paragraphs, fenced code, bulleted and numbered lists, `code`, **strong**,
     *emphasis*, [links](https://…) with http(s) or mailto only. Anything else (raw HTML included) stays text. */
  function markdown(text) {
    const fragment = document.createDocumentFragment();
    const lines = String(text).split(/\r?\n/);
    const fence = /^\s*```/;
    const bullet = /^\s*[-*+]\s+(.*)$/;
    const number = /^\s*\d+[.)]\s+(.*)$/;
    let i = 0;
    while (i < lines.length) {
      const current = lines[i];
      if (fence.test(current)) {
        const code = [];
        i += 1;
        while (i < lines.length && !fence.test(lines[i])) code.push(lines[i++]);
        i += 1;
        fragment.append(el("pre", { class: "tess-md-code" }, el("code", { text: code.join("\n") })));
      } else if (!current.trim()) {
        i += 1;
      } else if (bullet.test(current) || number.test(current)) {
        const kind = bullet.test(current) ? bullet : number;
        const list = el(kind === bullet ? "ul" : "ol", { class: "tess-md-list" });
        while (i < lines.length && kind.test(lines[i])) list.append(el("li", {}, ...inline(lines[i++].match(kind)[1])));
        fragment.append(list);
      } else {
        const paragraph = el("p");
        let first = true;
        while (i < lines.length && lines[i].trim() && !fence.test(lines[i]) && !bullet.test(lines[i]) && !number.test(lines[i])) {
          if (!first) paragraph.append(el("br"));
          paragraph.append(...inline(lines[i++]));
          first = false;
        }
        fragment.append(paragraph);
      }
    }
    return fragment;
  }

  // --- open / close -------------------------------------------------------------------------------

  function setOpen(open, { focus = true } = {}) {
    drawer.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    document.body.classList.toggle("tess-open", open);
    localStorage.setItem(OPEN_KEY, open ? "1" : "0");
    if (open) {
      // Filled while hidden, the panels could not scroll: opening shows the latest lines.
      conversation.scrollTop = conversation.scrollHeight;
      if (view) view.fit();
      toBottom();
      newOutput.hidden = true;
    }
    if (!focus) return;
    if (open) (input.disabled ? picker : input).focus();
    else toggle.focus();
  }

  toggle.addEventListener("click", () => setOpen(drawer.hidden));
  $("tess-close").addEventListener("click", () => setOpen(false));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || drawer.hidden) return;
    const dialog = $("tess-confirm");
    if (dialog && !dialog.hidden) return; // Esc first cancels the open confirmation (memory.js)
    if (keys.on && output.contains(event.target)) return; // typed into the terminal: the program's Esc
    event.preventDefault();
    setOpen(false);
  });

  // --- the memory chip --------------------------------------------------------------------------------

  function setScope(scope) {
    chip.textContent = CHIP[scope] || CHIP.session;
    chip.dataset.scope = scope === "profile" ? "profile" : "session";
  }
  window.Tess.setScope = setScope;

  // --- the conversation ------------------------------------------------------------------------------

  function sessionName(session) {
    return (session && (session.title || session.runtime_id)) || "the session";
  }

  function line(kind, who, ts, content) {
    const meta = el("div", { class: "tess-meta" }, el("span", { class: "tess-who", text: who }));
    if (ts) meta.append(timeNode(ts));
    const text = el("div", { class: "tess-text" });
    if (typeof content === "string") text.append(...richText(content));
    else text.append(content);
    const item = el("div", { class: "tess-line tess-" + kind }, meta, text);
    conversation.append(item);
    if (!state.replaying) conversation.scrollTop = conversation.scrollHeight;
    return item;
  }

  // A reply the model is still writing (turn.delta frames, never stored): one growing line per turn, taken
  // away when its turn.out (the whole text, durable) arrives. A turn announces itself with an empty piece as
  // soon as Tess starts on it: "Tess is thinking" until the first words, and Stop while it runs.
  const growing = new Map();
  const written = new Set(); // turns whose turn.out is shown: a late piece of one (the socket lagging the answer) is dropped
  const stopButton = $("tess-stop");

  function showStop() {
    stopButton.hidden = growing.size === 0;
    stopButton.disabled = false;
  }

  function grow(body) {
    let entry = growing.get(body.turn_id);
    if (!entry) {
      if (body.offset !== 0 || written.has(body.turn_id)) return; // joined mid-reply: the turn.out will show it whole
      const thinking = el("span", { class: "tess-thinking", text: "Tess is thinking…" });
      entry = { text: "", item: line("out tess-growing", "Tess", new Date().toISOString(), thinking) };
      entry.item.dataset.turnId = body.turn_id;
      growing.set(body.turn_id, entry);
      showStop();
    }
    // Pieces join at their offset; one that would not make the text longer (a repeat, or the text so far
    // sent again after a reconnect) changes nothing, and after a gap the turn.out shows the whole reply.
    if (body.offset > entry.text.length) return;
    const text = entry.text.slice(0, body.offset) + (body.text || "");
    if (text.length <= entry.text.length) return;
    entry.text = text;
    entry.item.querySelector(".tess-text").replaceChildren(markdown(entry.text));
    if (!state.replaying) conversation.scrollTop = conversation.scrollHeight;
  }

  function settle(turnId, done) {
    if (done) written.add(turnId);
    const entry = growing.get(turnId);
    if (entry) entry.item.remove();
    growing.delete(turnId);
    showStop();
  }

  // Stop the newest reply being written: the turn is written as stopped, and its turn.out replaces the line.
  async function stopReply() {
    const turnId = [...growing.keys()].pop();
    if (!turnId || !state.sessionId) return;
    stopButton.disabled = true;
    try {
      await api("POST", "sessions/" + state.sessionId + "/turns/" + turnId + "/stop/", {});
    } catch (error) {
      stopButton.disabled = false;
      systemLine("Not stopped: " + error.message);
    }
  }
  stopButton.addEventListener("click", stopReply);

  function systemLine(text, ts) {
    return line("system", "Tess", ts || new Date().toISOString(), text);
  }
  window.Tess.systemLine = (text) => systemLine(text);

  function recalledView(body) {
    const count = body.recalled_count;
    const label = "Recalled: " + plural(count, "operator note", "operator notes");
    const ids = body.recalled || [];
    // Only the session's owner can read their notes; anyone else sees the count alone.
    if (!ids.length || !state.session || state.session.owner !== state.me) {
      return el("div", { class: "tess-recalled", text: label });
    }
    const list = el("ul", { class: "tess-recalled-notes" });
    const box = el("details", { class: "tess-recalled" }, el("summary", { text: label }), list);
    box.addEventListener("toggle", async () => {
      if (!box.open || list.dataset.loaded) return;
      list.dataset.loaded = "1";
      try {
        const rows = (await api("GET", "memory/")).rows.filter((row) => ids.includes(String(row.memory_id)));
        for (const row of rows) list.append(el("li", { text: (window.Tess.categoryWords?.(row.category) || row.category) + ": " + row.value }));
        const gone = ids.length - rows.length;
        if (gone) list.append(el("li", { class: "tess-quiet", text: plural(gone, "note has", "notes have") + " since been changed or deleted." }));
      } catch (error) {
        list.append(el("li", { class: "tess-error", text: "Your notes could not be read: " + error.message }));
      }
    });
    return box;
  }

  // A turn's line knows its seq, so a later "redacted" event (a forgotten note's words) can replace its text.
  const REDACTED_TEXT = "(forgotten memory request)"; // sessions_app.redaction.REDACTED_TEXT

  function bySeq(event, item) {
    if (typeof event.seq === "number") item.dataset.seq = String(event.seq);
    if ((event.body || {}).text === REDACTED_TEXT) item.classList.add("tess-redacted");
    return item;
  }

  function redact(body) {
    for (const seq of body.seqs || []) {
      const item = conversation.querySelector('.tess-line[data-seq="' + Number(seq) + '"]');
      if (!item) continue;
      item.classList.add("tess-redacted");
      item.querySelector(".tess-text").replaceChildren(document.createTextNode(body.text || ""));
    }
  }

  function render(event) {
    if (event.seq !== null && event.seq !== undefined) {
      if (state.seen.has(event.seq)) return;
      state.seen.add(event.seq);
    }
    const body = event.body || {};
    switch (event.kind) {
      case "output":
        appendOutput(body);
        break;
      case "turn.in":
        bySeq(event, line("in", body.channel && body.channel !== "web" ? "You (" + body.channel + ")" : "You", event.ts, body.text || ""));
        break;
      case "turn.delta":
        grow(body);
        break;
      case "turn.out": {
        settle(body.turn_id, true);
        const reply = bySeq(event, line("out", "Tess", event.ts, markdown(body.text || "")));
        if (body.stopped) {
          reply.classList.add("tess-stopped");
          reply.append(el("div", { class: "tess-stopped-note", text: body.text ? "Stopped: the reply ends here." : "Stopped before Tess wrote anything." }));
        }
        if (body.recalled_count > 0) reply.append(recalledView(body)); // seed 002: right under the reply
        break;
      }
      case "system":
        line("system", sessionName(state.session), event.ts, body.text || "");
        break;
      case "redacted":
        redact(body);
        break;
      case "card":
        window.Tess.upsertCard(body);
        break;
      case "approval":
        if (known("approval", body.id)) upsertApproval(body);
        else fetchApproval(body.id);
        break;
      case "handoff":
        upsertHandoff(body);
        break;
      case "status":
        // Live changes only: on load the session's row (read at the same time as the tail) is newer.
        if (!state.replaying) showSession({ ...state.session, status: body.status, agent_state: body.agent_state || state.session?.agent_state });
        break;
      default:
        break;
    }
  }

  function showSession(session) {
    const before = state.session;
    state.session = session;
    const ended = ENDED.has(session.status);
    const agent = AGENT[session.agent_state] || AGENT.unknown;
    sessionState.dataset.status = session.status;
    sessionState.dataset.agentState = session.agent_state || "unknown";
    sessionState.replaceChildren(
      el("span", { class: "tess-status-badge", "data-status": session.status, text: ended ? "Ended (" + session.status + ")" : session.status }),
      el("span", { class: "tess-agent-state", text: "Agent: " + agent }),
    );
    const option = [...picker.options].find((o) => o.value === session.id);
    if (option) option.textContent = sessionLabel(session);
    if (ended) {
      input.disabled = true;
      showInteractive(false);
    }
    if (ended && before && before.id === session.id && !ENDED.has(before.status) && !state.replaying) {
      systemLine("The session has ended (" + session.status + ").");
    }
  }

  // The session's usage in the header: its agent's (the runtime's own figure, or "unknown" where the runtime
  // reports none: never 0) and Tess's own model turns in it, each with its tokens.
  function showUsage(usage) {
    if (!usage) {
      sessionUsage.hidden = true;
      sessionUsage.replaceChildren();
      return;
    }
    const part = (label, figures) => {
      const tokens = figures.tokens == null ? "" : " · " + Number(figures.tokens).toLocaleString() + " tokens";
      return el("span", { class: "tess-usage-part", "data-part": label, text: label + ": " + figures.text + tokens });
    };
    const parts = [part("Agent", usage.agent)];
    if (usage.tess) parts.push(part("Tess", usage.tess));
    sessionUsage.replaceChildren(el("span", { class: "tess-usage-label", text: "Usage" }), ...parts);
    sessionUsage.hidden = false;
  }

  async function send() {
    const text = input.value;
    if (!text.trim() || !state.sessionId) return;
    input.disabled = true;
    let failed = false;
    try {
      const turn = await api("POST", "sessions/" + state.sessionId + "/turns/", { text });
      if (input.value === text) input.value = "";
      applyTurn(turn);
    } catch (error) {
      failed = true;
      const turn = error.details && error.details.turn;
      // A recorded refusal is Tess's reply, shown once; anything else is said in a line of the drawer's own.
      if (turn) applyTurn(turn);
      else systemLine("Not sent: " + error.message + " Your text is still in the box.");
    } finally {
      if (!state.session || !ENDED.has(state.session.status)) input.disabled = false;
      input.focus();
      if (failed) input.setSelectionRange(input.value.length, input.value.length);
    }
  }

  function applyTurn(turn) {
    if (turn.memory) setScope(turn.memory.scope);
    for (const event of turn.events || []) render(event);
    for (const card of turn.cards || []) window.Tess.upsertCard(card);
    for (const approval of turn.approvals || []) upsertApproval({ session_id: state.sessionId, ...approval });
    for (const handoff of turn.handoffs || []) upsertHandoff(handoff);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  input.addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter adds a line; a composing IME keeps its Enter.
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });

  // --- the live output: a terminal ---------------------------------------------------------------------

  /* The session's output as its terminal shows it (terminal.js, xterm.js). A tmux session opens on its screen
     as it is now (GET …/screen/: a full-screen program's state cannot be rebuilt from the tail alone), after
     the tail's output that came before it (the terminal's scrollback); live output of that pane after the
     screen's cursor is drawn on top. Other runtimes have no screen: their output is written as it comes.
     "Load earlier" rebuilds the terminal with the earlier output first, while what it drew so far is kept
     (up to KEPT_CHARS; beyond that it pages back the conversation only). Without xterm.js: text. */
  const KEPT_CHARS = 4 * 1024 * 1024;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const view = window.Tess.createTerminal ? window.Tess.createTerminal(output, { onKeys: queueKeys }) : null;
  if (view) {
    output.classList.add("tess-terminal");
    window.Tess.terminal = view.terminal;
  }
  const term = { screen: null, log: [], chars: 0, trimmed: false };

  function offsetIn(cursor, source) {
    for (const part of String(cursor || "").split(",")) {
      const at = part.lastIndexOf(":");
      if (at > 0 && part.slice(0, at) === source) return Number(part.slice(at + 1)) || 0;
    }
    return 0;
  }

  /* What of an output event is not on the screen read at open: null when all of it is (it came before). */
  function afterScreen(body) {
    const data = body.data || "";
    const screen = term.screen;
    if (!screen) return data;
    if ((body.source || "") !== screen.source) return ""; // another pane: not the one shown
    const mark = offsetIn(screen.cursor, screen.source);
    const start = offsetIn(body.cursor, screen.source);
    const end = offsetIn(body.next_cursor, screen.source);
    if (end <= mark) return null;
    if (start >= mark) return data;
    return decoder.decode(encoder.encode(data).slice(mark - start));
  }

  function termWrite(data, { keep = true } = {}) {
    if (!data) return;
    if (!view) {
      output.append(document.createTextNode(data));
      return;
    }
    view.write(data);
    if (!keep) return;
    term.log.push(data);
    term.chars += data.length;
    while (term.chars > KEPT_CHARS && term.log.length > 1) {
      term.chars -= term.log.shift().length;
      term.trimmed = true;
    }
  }

  function atBottom() {
    if (view) return view.atBottom();
    return output.scrollHeight - output.scrollTop - output.clientHeight < 8;
  }

  function toBottom() {
    if (view) view.scrollToBottom();
    else output.scrollTop = output.scrollHeight;
  }

  function appendOutput(body) {
    const data = afterScreen(body);
    if (!data) return;
    if (state.replaying) {
      termWrite(data);
      return;
    }
    const stick = atBottom();
    termWrite(data);
    if (stick) toBottom();
    else newOutput.hidden = false;
  }

  if (view) view.onScroll(() => {
    if (atBottom()) newOutput.hidden = true;
  });
  output.addEventListener("scroll", () => {
    if (atBottom()) newOutput.hidden = true;
  });
  newOutput.addEventListener("click", () => {
    toBottom();
    newOutput.hidden = true;
    if (view) view.focus();
    else output.focus();
  });

  function resetTerminal(screen, { text = false } = {}) {
    term.screen = screen;
    term.log = [];
    term.chars = 0;
    term.trimmed = false;
    if (!view) {
      output.replaceChildren();
      return;
    }
    view.reset();
    view.setText(text);
    view.size(screen ? screen.cols : null, screen ? screen.rows : null);
  }

  /* The first page of a session: the tail's output before the screen, the screen, then what came after. */
  function renderTail(events) {
    const before = [];
    const after = [];
    for (const event of events) {
      if (event.kind !== "output") continue;
      state.seen.add(event.seq);
      const data = afterScreen(event.body || {});
      if (data === null) before.push(event.body.data || "");
      else if (data) after.push(data);
    }
    for (const data of before) termWrite(data);
    if (term.screen) termWrite(term.screen.data);
    for (const data of after) termWrite(data);
    renderHistory(events.filter((event) => event.kind !== "output"));
    toBottom();
  }

  /* Render a page of history (oldest first) without moving what the reader is looking at. */
  function renderHistory(events, { before = false } = {}) {
    state.replaying = true;
    const keptLines = before ? [...conversation.childNodes] : [];
    const lineFromBottom = conversation.scrollHeight - conversation.scrollTop;
    if (before) conversation.replaceChildren();
    const earlier = [];
    try {
      for (const event of events) {
        if (event.kind === "output") {
          const shown = !term.screen || (event.body.source || "") === term.screen.source;
          if (!state.seen.has(event.seq) && before && shown) earlier.push(event.body.data || "");
          state.seen.add(event.seq);
        } else render(event);
      }
    } finally {
      state.replaying = false;
    }
    if (before) {
      conversation.append(...keptLines);
      conversation.scrollTop = conversation.scrollHeight - lineFromBottom;
      if (earlier.length && !term.trimmed) prependOutput(earlier);
    } else {
      conversation.scrollTop = conversation.scrollHeight;
    }
  }

  /* Earlier output goes first: the terminal is drawn again from it and everything kept since. */
  function prependOutput(earlier) {
    const kept = term.log;
    term.log = [];
    term.chars = 0;
    if (view) view.reset();
    else output.replaceChildren();
    for (const data of [...earlier, ...kept]) termWrite(data);
  }

  // --- interactive: keystrokes to the runtime, in order, each batch once --------------------------------

  const keys = { queue: "", sending: false, on: false, attaching: false };

  function queueKeys(data) {
    if (!keys.on) return;
    keys.queue += data;
    if (!keys.sending) sendKeys();
  }

  /* One POST at a time (each with its own Idempotency-Key, see api.js), so keystrokes arrive in order;
     what is typed while one is on its way goes in the next. */
  async function sendKeys() {
    keys.sending = true;
    const session = state.sessionId;
    try {
      while (keys.queue && keys.on && session === state.sessionId) {
        const text = keys.queue.slice(0, 4000);
        keys.queue = keys.queue.slice(text.length);
        try {
          await api("POST", "sessions/" + session + "/messages/", { text, keys: true });
        } catch (error) {
          keys.queue = "";
          systemLine("Your keys were not sent: " + error.message);
          setInteractive(false, { detach: false });
        }
      }
    } finally {
      keys.sending = false;
    }
  }

  function showInteractive(available) {
    interactiveButton.hidden = !available || !view;
    if (interactiveButton.hidden && keys.on) setInteractive(false);
  }

  async function setInteractive(on, { detach = true } = {}) {
    const session = state.sessionId;
    if (on) {
      if (keys.attaching || !session) return;
      keys.attaching = true;
      interactiveButton.disabled = true;
      try {
        await api("POST", "sessions/" + session + "/attach/", { mode: "interactive" });
        if (session !== state.sessionId) return;
        keys.on = true;
      } catch (error) {
        systemLine("Interactive mode is not available: " + error.message);
      } finally {
        keys.attaching = false;
        interactiveButton.disabled = false;
      }
    } else {
      const was = keys.on;
      keys.on = false;
      keys.queue = "";
      if (was && detach && session) api("POST", "sessions/" + session + "/detach/", {}).catch(() => {});
    }
    interactiveButton.setAttribute("aria-pressed", String(keys.on));
    interactiveButton.textContent = keys.on ? "Interactive: on" : "Interactive";
    interactiveButton.title = keys.on
      ? "Your keys go to the session's terminal. Click to stop."
      : "Type into the session: your keys go to its terminal";
    output.dataset.mode = keys.on ? "interactive" : "read-only";
    if (view) {
      view.setInteractive(keys.on);
      if (keys.on) view.focus();
    }
  }

  interactiveButton.addEventListener("click", () => setInteractive(!keys.on));

  function showEarlier(prevCursor) {
    state.prevCursor = prevCursor;
    loadEarlierButton.hidden = prevCursor === null || prevCursor === undefined;
  }

  loadEarlierButton.addEventListener("click", async () => {
    const generation = state.generation;
    loadEarlierButton.disabled = true;
    try {
      const page = await api("GET", "sessions/" + state.sessionId + "/events/?before=" + state.prevCursor + "&limit=" + TAIL);
      if (generation !== state.generation) return;
      renderHistory(page.events, { before: true });
      showEarlier(page.prev_cursor);
    } catch (error) {
      systemLine("Earlier events could not be loaded: " + error.message);
    } finally {
      loadEarlierButton.disabled = false;
    }
  });

  function setConnection(text, status) {
    connection.textContent = text;
    connection.dataset.state = status;
  }

  function connect() {
    const generation = state.generation;
    if (!state.sessionId) return;
    clearTimeout(state.timer);
    setConnection(state.retry ? "Reconnecting…" : "Connecting…", "connecting");
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const url = scheme + location.host + "/ws/sessions/" + state.sessionId + "/stream/?cursor=" + state.lastSeq;
    const socket = new WebSocket(url);
    state.socket = socket;
    socket.addEventListener("open", () => {
      if (generation !== state.generation) return;
      state.retry = 0;
      setConnection("Live", "live");
    });
    socket.addEventListener("message", (message) => {
      if (generation !== state.generation) return;
      const event = JSON.parse(message.data);
      if (event.kind === "heartbeat") return;
      if (event.kind === "binding.moved") return followMove(event.body || {});
      if (typeof event.seq === "number" && event.seq > state.lastSeq) state.lastSeq = event.seq;
      output.dataset.lastSeq = String(state.lastSeq);
      render(event);
    });
    socket.addEventListener("close", (close) => {
      if (generation !== state.generation) return;
      state.socket = null;
      if (close.code === 4404 || close.code === 4401) {
        setConnection("Disconnected: no access to this session", "closed");
        return;
      }
      state.retry += 1;
      const delay = Math.min(10000, 500 * 2 ** Math.min(state.retry - 1, 5));
      setConnection("Reconnecting…", "reconnecting");
      state.timer = setTimeout(connect, delay);
    });
  }

  // A cutover (or its rollback) moved this browser's binding to another session: switch to it, and say so.
  async function followMove(body) {
    if (!body.to || body.to === state.sessionId) return;
    const from = state.session ? sessionName(state.session) : "session " + String(body.from).slice(0, 8);
    await window.Tess.selectSession(body.to);
    if (state.sessionId !== body.to) return;
    const notice = systemLine("Moved here from " + from + " by a cutover (migration " + body.migration + ").");
    notice.dataset.moved = body.from;
  }

  function disconnect() {
    state.generation += 1;
    for (const turnId of [...growing.keys()]) settle(turnId); // a new socket sends each reply so far again
    clearTimeout(state.timer);
    if (state.socket) state.socket.close(1000);
    state.socket = null;
  }

  // --- sessions --------------------------------------------------------------------------------------

  function sessionLabel(session) {
    let label = sessionName(session) + " — " + session.status;
    if (!ENDED.has(session.status) && session.agent_state && session.agent_state !== "unknown") {
      label += ", " + (AGENT[session.agent_state] || session.agent_state);
    }
    if (session.health && !session.health.ok && !ENDED.has(session.status)) label += " (runtime not answering)";
    return label;
  }

  function clearCards() {
    for (const card of [...cards.children, ...historyList.children]) {
      if (card.dataset.kind !== "approval-link") card.remove();
    }
    refreshCards();
  }

  async function selectSession(id) {
    if (keys.on) setInteractive(false); // the attachment was to the session being left
    showInteractive(false);
    disconnect();
    const generation = state.generation;
    Object.assign(state, { sessionId: id, session: null, lastSeq: 0, seen: new Set(), retry: 0 });
    conversation.replaceChildren();
    resetTerminal(null);
    delete output.dataset.lastSeq;
    delete output.dataset.ready;
    newOutput.hidden = true;
    showEarlier(null);
    clearCards();
    input.disabled = true;
    sessionState.replaceChildren();
    showUsage(null);
    delete sessionState.dataset.status;
    delete sessionState.dataset.agentState;
    if (id) localStorage.setItem(SESSION_KEY, id);
    if (!id) {
      setConnection("No session selected", "closed");
      return;
    }
    setConnection("Loading…", "connecting");
    const query = "session_id=" + encodeURIComponent(id);
    let read;
    try {
      read = await Promise.all([
        api("GET", "sessions/" + id + "/"),
        api("GET", "sessions/" + id + "/events/?tail=" + TAIL),
        api("GET", "cards/?" + query + "&page_size=50"),
        api("GET", "approvals/?" + query + "&page_size=50"),
        api("GET", "handoffs/?" + query),
        // A terminal's screen now (tmux); a runtime without one, or an ended session, answers an error: none.
        api("GET", "sessions/" + id + "/screen/").catch((error) => ({ missing: error.status })),
      ]);
    } catch (error) {
      if (generation !== state.generation) return;
      systemLine("This session could not be read: " + error.message);
      setConnection("Not connected", "closed");
      return;
    }
    if (generation !== state.generation) return;
    const [session, page, cardPage, approvalPage, handoffPage, screen] = read;
    showSession({ ...sessionsById.get(id), ...session });
    showUsage(session.usage);
    for (const card of [...cardPage.results].reverse()) window.Tess.upsertCard(card);
    for (const approval of [...approvalPage.results].reverse()) upsertApproval(approval);
    for (const handoff of [...handoffPage.results].reverse()) upsertHandoff(handoff);
    // 409: a terminal that has ended (its output is a terminal's, lines end in CR LF); otherwise a runtime
    // without a screen, whose text ends lines with LF alone.
    resetTerminal(screen.missing ? null : screen, { text: !!screen.missing && screen.missing !== 409 });
    renderTail(page.events);
    output.dataset.ready = "1";
    showInteractive(!screen.missing && !ENDED.has(session.status));
    state.lastSeq = page.next_cursor;
    output.dataset.lastSeq = String(state.lastSeq);
    showEarlier(page.prev_cursor);
    input.disabled = ENDED.has(session.status);
    connect();
  }

  picker.addEventListener("change", () => selectSession(picker.value));

  async function loadSessions() {
    let sessions = [];
    try {
      sessions = (await api("GET", "sessions/")).results;
    } catch (error) {
      systemLine("Sessions could not be loaded: " + error.message);
      return;
    }
    // Each session's runtime instance and whether it answers now (its heartbeat): said only when it does not.
    const health = {};
    try {
      for (const instance of (await api("GET", "providers/")).results) health[instance.name] = instance.health;
    } catch (error) {
      /* the labels go without it */
    }
    picker.replaceChildren(el("option", { value: "", text: sessions.length ? "Choose a session…" : "No sessions" }));
    sessionsById.clear();
    for (const session of sessions) {
      const known = { ...session, health: health[session.provider] };
      sessionsById.set(session.id, known);
      picker.append(el("option", { value: session.id, text: sessionLabel(known), "data-status": session.status }));
    }
    const remembered = localStorage.getItem(SESSION_KEY);
    const initial = sessions.find((s) => s.id === remembered) || sessions.find((s) => s.status === "running");
    picker.value = initial ? initial.id : "";
    await selectSession(picker.value);
  }

  // --- cards: pending ones act, decided ones fold into a short history ----------------------------------

  // Per kind, how far along each status is: a late or repeated message never moves a card back.
  const RANK = {
    memory: { pending: 0, confirmed: 1, dismissed: 1 },
    approval: { pending: 0, approved: 1, denied: 2, expired: 2, executed: 3, failed: 3 },
    handoff: { queued: 0, dispatched: 1, acknowledged: 2, completed: 3, failed: 3 },
    "approval-link": { pending: 0, approved: 1, denied: 1, expired: 1, executed: 1, failed: 1 },
  };
  const OPEN = {
    memory: new Set(["pending"]),
    approval: new Set(["pending", "approved"]),
    handoff: new Set(["queued", "dispatched", "acknowledged"]),
    "approval-link": new Set(["pending"]),
  };

  function known(kind, id) {
    return !!findCard(kind, id);
  }

  function findCard(kind, id) {
    const selector = '[data-kind="' + kind + '"][data-id="' + CSS.escape(id) + '"]';
    return cards.querySelector(selector) || historyList.querySelector(selector);
  }

  function cardFor(kind, id, title) {
    let card = findCard(kind, id);
    if (!card) {
      card = el(
        "li",
        { class: "tess-card tess-card-" + kind, "data-kind": kind, "data-id": id },
        el("div", { class: "tess-card-title", text: title }),
        el("div", { class: "tess-card-status", role: "status" }),
      );
      cards.prepend(card);
      refreshCards();
    } else if (title && !card.dataset.titled) {
      card.querySelector(".tess-card-title").textContent = title;
    }
    card.setAttribute("aria-label", card.querySelector(".tess-card-title").textContent);
    return card;
  }

  /* Whether ``status`` would move ``card`` back: then the message is older than what is shown. */
  function isStale(card, status) {
    const rank = RANK[card.dataset.kind] || {};
    return card.dataset.status !== undefined && (rank[status] ?? 0) < (rank[card.dataset.status] ?? 0);
  }

  /* Move a decided card into the history (newest first, the last few shown) and drop its actions. */
  function settleCard(card) {
    const open = OPEN[card.dataset.kind];
    if (!open || open.has(card.dataset.status)) {
      if (card.parentNode !== cards) cards.prepend(card);
    } else {
      card.querySelector(".tess-card-actions")?.remove();
      if (card.parentNode !== historyList) historyList.prepend(card);
    }
    refreshCards();
  }

  function refreshCards() {
    const decided = historyList.children.length;
    history.hidden = decided === 0;
    history.querySelector("summary").textContent = "Decided (" + decided + ")";
    [...historyList.children].forEach((card, index) => (card.hidden = index >= HISTORY_SHOWN));
    cardsEmpty.hidden = cards.children.length > 0;
  }

  function actionWords(approval) {
    const session = sessionsById.get(approval.session_id || approval.target_id);
    const name = session ? "“" + sessionName(session) + "”" : "";
    if (approval.action === "session.terminate") return "Terminate the session " + (name || "");
    const action = String(approval.action || "an action").replace(/[._]/g, " ");
    return action.charAt(0).toUpperCase() + action.slice(1) + (name ? " on " + name : "");
  }

  function approvalStatusWords(approval, status) {
    switch (status) {
      case "pending":
        return "Waiting for an approver" + (approval.expires_at ? " until " : ".");
      case "approved":
        return "Approved; running now.";
      case "executed":
        return "Approved and done.";
      case "failed":
        return "Approved, but it failed" + (approval.result && approval.result.error ? ": " + (approval.result.error.message || approval.result.error) : ".");
      case "denied":
        return "Denied" + (approval.decided_by ? " by " + approval.decided_by : "") + (approval.decision_reason ? ": " + approval.decision_reason : ".");
      case "expired":
        return "Expired: nobody decided in time.";
      default:
        return status;
    }
  }

  async function fetchApproval(id) {
    try {
      upsertApproval(await api("GET", "approvals/" + id + "/"));
    } catch (error) {
      /* not an approval this person may read: the stream's reply already said what happened */
    }
  }

  function upsertApproval(approval) {
    const done = approval.execution === "executed" || approval.execution === "failed";
    const status = done ? approval.execution : approval.status;
    const card = cardFor("approval", approval.id, approval.action ? actionWords(approval) : "");
    if (approval.action) card.dataset.titled = "1";
    if (!card.querySelector(".tess-card-title").textContent) card.querySelector(".tess-card-title").textContent = "Approval";
    if (isStale(card, status)) return;
    card.dataset.status = status;
    // Not every message carries the deadline (/ws/me/ sends ids and statuses): keep the one read before.
    if (approval.expires_at) card.dataset.expires = approval.expires_at;
    const expires = card.dataset.expires;
    const line = card.querySelector(".tess-card-status");
    line.replaceChildren(approvalStatusWords({ ...approval, expires_at: expires }, status));
    if (status === "pending" && expires) line.append(timeNode(expires), ".");
    settleCard(card);
  }

  function approvalLink(body) {
    // Only the approver's own socket carries a link; it opens the page, which never acts by itself.
    const card = cardFor("approval-link", body.id, "Approval asked of you: " + actionWords(body));
    card.dataset.titled = "1";
    card.dataset.status = "pending";
    let link = card.querySelector("a");
    if (!link) card.append((link = el("a", { class: "tess-button", text: "Open the approval page" })));
    // A resend or a fresh link from the inbox replaces the token: the older link no longer works.
    link.href = body.url;
    settleCard(card);
  }

  const HANDOFF_WORDS = {
    queued: "Queued for Mos.",
    dispatched: "Sent to Mos.",
    acknowledged: "Mos is working on it.",
    completed: "Done by Mos.",
    failed: "Mos could not do it.",
  };

  function upsertHandoff(handoff) {
    const title = handoff.summary ? "Hand-off to Mos: " + handoff.summary : "Hand-off to Mos";
    const card = cardFor("handoff", handoff.id, title);
    if (handoff.summary) card.dataset.titled = "1";
    if (isStale(card, handoff.status)) return;
    card.dataset.status = handoff.status;
    card.querySelector(".tess-card-status").textContent = HANDOFF_WORDS[handoff.status] || handoff.status;
    if (handoff.result) {
      let result = card.querySelector(".tess-card-result");
      if (!result) card.append((result = el("div", { class: "tess-card-result" })));
      const text = typeof handoff.result === "string" ? handoff.result : JSON.stringify(handoff.result);
      result.replaceChildren("Result: ", ...richText(text));
    }
    settleCard(card);
  }

  // --- /ws/me/: what concerns this person across sessions ---------------------------------------------

  function aboutThisSession(body) {
    return !!state.sessionId && String(body.session_id || "") === state.sessionId;
  }

  let meRetry = 0;
  function connectMe() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + "/ws/me/");
    socket.addEventListener("open", () => (meRetry = 0));
    socket.addEventListener("message", (message) => {
      const event = JSON.parse(message.data);
      const body = event.body || {};
      if (event.kind === "approval") {
        if (aboutThisSession(body) || known("approval", body.id)) upsertApproval(body);
        if (aboutThisSession(body) && body.execution === "executed") refreshSession();
      } else if (event.kind === "snapshot") {
        // Sent first on every (re)connect; the selected session's items come from its own reads as well.
        for (const card of body.cards || []) if (aboutThisSession(card) || known("memory", card.id)) window.Tess.upsertCard(card);
        for (const approval of [...(body.approvals_to_decide || []), ...(body.approvals_requested || [])]) {
          if (aboutThisSession(approval) || known("approval", approval.id)) upsertApproval(approval);
        }
      } else if (event.kind === "approval.link") approvalLink(body);
      else if (event.kind === "card") {
        if (aboutThisSession(body) || known("memory", body.id)) window.Tess.upsertCard(body);
      } else if (event.kind === "handoff") {
        if (aboutThisSession(body) || known("handoff", body.id)) upsertHandoff(body);
      } else if (event.kind === "inbox.left" && String(body.key || "").startsWith("card:")) {
        // Decided somewhere else (another tab, the CLI, the inbox): read its outcome.
        const id = body.key.slice(5);
        if (known("memory", id)) window.Tess.refreshCard(id);
      }
      for (const listener of window.Tess.onMeEvent) listener(event);
    });
    socket.addEventListener("close", (close) => {
      if (close.code === 4401 || close.code === 4403) return;
      meRetry += 1;
      setTimeout(connectMe, Math.min(10000, 500 * 2 ** Math.min(meRetry, 5)));
    });
  }

  async function refreshSession() {
    if (!state.sessionId) return;
    const id = state.sessionId;
    try {
      const session = await api("GET", "sessions/" + id + "/");
      if (id === state.sessionId) showSession({ ...state.session, ...session });
    } catch (error) {
      systemLine("The session could not be read: " + error.message);
    }
  }

  // --- start ------------------------------------------------------------------------------------------

  async function start() {
    try {
      state.me = (await api("GET", "me/")).username;
    } catch (error) {
      // Not a member of any tenant: no drawer (the admin still works).
      root.hidden = true;
      return;
    }
    root.hidden = false;
    setOpen(localStorage.getItem(OPEN_KEY) === "1", { focus: false });
    window.Tess.onStart.forEach((fn) => fn());
    connectMe();
    await loadSessions();
  }

  Object.assign(window.Tess, {
    cards,
    cardFor,
    settleCard,
    isStale,
    plural,
    markdown,
    richText,
    timeNode,
    shortId,
    onStart: window.Tess.onStart || [],
    onMeEvent: window.Tess.onMeEvent || [],
    selectSession: (id) => {
      picker.value = id;
      if (picker.value === id) return selectSession(id);
      return loadSessions().then(() => {
        picker.value = id;
        if (picker.value === id) return selectSession(id);
      });
    },
    openSession: (id) => {
      setOpen(true);
      return window.Tess.selectSession(id);
    },
  });
  document.addEventListener("DOMContentLoaded", start);
})();
