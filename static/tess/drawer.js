/* The Tess drawer on every admin page: sessions, the conversation, the live output, cards.

The session stream is the truth: every event has a per-session seq; the drawer renders each seq once,
whether it came in a turn's response or over the websocket, and reconnects with ?cursor=<last seq>. */
(function () {
  "use strict";
  const { api, el, plural } = window.Tess;
  const OPEN_KEY = "tess.drawer.open";
  const SESSION_KEY = "tess.drawer.session";
  const CHIP = { profile: "Memory: Operator profile", session: "Memory: Session only" };
  const FINAL_SESSION = { exited: "Session ended (exited)", terminated: "Session ended (terminated)" };

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
  const connection = $("tess-connection");
  const sessionState = $("tess-session-state");
  const cards = $("tess-cards");
  const chip = $("tess-memory-chip");

  const state = { sessionId: "", lastSeq: 0, seen: new Set(), socket: null, retry: 0, timer: null, generation: 0 };

  // --- open / close -------------------------------------------------------------------------------

  function setOpen(open, { focus = true } = {}) {
    drawer.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    document.body.classList.toggle("tess-open", open);
    localStorage.setItem(OPEN_KEY, open ? "1" : "0");
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

  function line(kind, text, extra) {
    const item = el("li", { class: "tess-line tess-" + kind }, el("span", { class: "tess-text", text }));
    if (extra) item.append(extra);
    conversation.append(item);
    conversation.scrollTop = conversation.scrollHeight;
    return item;
  }

  function systemLine(text) {
    return line("system", text);
  }
  window.Tess.systemLine = systemLine;

  function render(event) {
    if (event.seq !== null && event.seq !== undefined) {
      if (state.seen.has(event.seq)) return;
      state.seen.add(event.seq);
    }
    const body = event.body || {};
    switch (event.kind) {
      case "output":
        appendOutput(body.data || "");
        break;
      case "turn.in":
        line("in", body.text || "").setAttribute("aria-label", "You said");
        break;
      case "turn.out": {
        const reply = line("out", body.text || "");
        reply.setAttribute("aria-label", "Tess replied");
        if (body.recalled_count > 0) {
          // seed 002: the disclosure sits directly under the reply it grounded.
          reply.append(el("div", { class: "tess-recalled", text: "Recalled: " + body.recalled_count + " operator notes" }));
          conversation.scrollTop = conversation.scrollHeight;
        }
        break;
      }
      case "system":
        systemLine(body.text || "");
        break;
      case "card":
        window.Tess.upsertCard(body);
        break;
      case "approval":
        upsertApproval(body);
        break;
      case "handoff":
        upsertHandoff(body);
        break;
      case "status":
        showSessionStatus(body.status);
        break;
      default:
        break;
    }
  }

  function showSessionStatus(status) {
    // The stream's status event and a refresh after an approval can both report the same ending: say it once.
    if (sessionState.dataset.status === status) return;
    const ended = FINAL_SESSION[status];
    sessionState.textContent = ended || "";
    sessionState.dataset.status = status;
    const option = picker.selectedOptions[0];
    if (option && option.value && option.dataset.status && option.dataset.status !== status) {
      option.textContent = option.textContent.replace(" — " + option.dataset.status + " (", " — " + status + " (");
      option.dataset.status = status;
    }
    if (ended) {
      systemLine(ended + ".");
      input.disabled = true;
    }
  }

  async function send() {
    const text = input.value;
    if (!text.trim() || !state.sessionId) return;
    input.value = "";
    input.disabled = true;
    try {
      const turn = await api("POST", "sessions/" + state.sessionId + "/turns/", { text });
      applyTurn(turn);
    } catch (error) {
      const turn = error.details && error.details.turn;
      if (turn) applyTurn(turn);
      systemLine("Not done: " + error.message);
    } finally {
      if (!FINAL_SESSION[sessionState.dataset.status]) input.disabled = false;
      input.focus();
    }
  }

  function applyTurn(turn) {
    if (turn.memory) setScope(turn.memory.scope);
    for (const event of turn.events || []) render(event);
    for (const card of turn.cards || []) window.Tess.upsertCard(card);
    for (const approval of turn.approvals || []) upsertApproval(approval);
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

  // --- the live output ------------------------------------------------------------------------------

  function atBottom() {
    return output.scrollHeight - output.scrollTop - output.clientHeight < 8;
  }

  function appendOutput(data) {
    const stick = atBottom();
    output.append(document.createTextNode(data));
    if (stick) output.scrollTop = output.scrollHeight;
    else newOutput.hidden = false;
  }

  output.addEventListener("scroll", () => {
    if (atBottom()) newOutput.hidden = true;
  });
  newOutput.addEventListener("click", () => {
    output.scrollTop = output.scrollHeight;
    newOutput.hidden = true;
    output.focus();
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

  function disconnect() {
    state.generation += 1;
    clearTimeout(state.timer);
    if (state.socket) state.socket.close(1000);
    state.socket = null;
  }

  // --- sessions --------------------------------------------------------------------------------------

  function selectSession(id) {
    disconnect();
    Object.assign(state, { sessionId: id, lastSeq: 0, seen: new Set(), retry: 0 });
    conversation.replaceChildren();
    output.replaceChildren();
    newOutput.hidden = true;
    input.disabled = !id;
    sessionState.textContent = "";
    delete sessionState.dataset.status;
    if (id) localStorage.setItem(SESSION_KEY, id);
    if (!id) {
      setConnection("No session selected", "closed");
      return;
    }
    // An ended session's history ends with its final status event; the replay shows it (once).
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
    // Each session names its runtime instance and whether that instance answers now (its heartbeat).
    const health = {};
    try {
      for (const instance of (await api("GET", "providers/")).results) health[instance.name] = instance.health;
    } catch (error) {
      systemLine("Runtime health could not be loaded: " + error.message);
    }
    picker.replaceChildren(el("option", { value: "", text: sessions.length ? "Choose a session…" : "No sessions" }));
    for (const session of sessions) {
      const known = health[session.provider];
      const state = known === undefined ? "" : known.ok ? ": healthy" : ": unreachable";
      const label = (session.title || session.runtime_id) + " — " + session.status + " (" + session.provider + state + ")";
      picker.append(el("option", { value: session.id, text: label, "data-status": session.status }));
    }
    const remembered = localStorage.getItem(SESSION_KEY);
    const initial = sessions.find((s) => s.id === remembered) || sessions.find((s) => s.status === "running");
    picker.value = initial ? initial.id : "";
    selectSession(picker.value);
  }

  // --- approvals and hand-offs -------------------------------------------------------------------------

  function cardFor(kind, id, title) {
    let card = cards.querySelector('[data-kind="' + kind + '"][data-id="' + CSS.escape(id) + '"]');
    if (!card) {
      card = el(
        "li",
        { class: "tess-card tess-card-" + kind, "data-kind": kind, "data-id": id, "aria-label": title },
        el("div", { class: "tess-card-title", text: title }),
        el("div", { class: "tess-card-status", role: "status" }),
      );
      cards.prepend(card);
    }
    return card;
  }

  // pending → approved | denied | expired → executed | failed: a late or repeated message never moves back.
  const APPROVAL_RANK = { pending: 0, approved: 1, denied: 2, expired: 2, executed: 3, failed: 3 };

  function upsertApproval(approval) {
    const card = cardFor("approval", approval.id, "Approval: " + (approval.action || "action"));
    const done = approval.execution === "executed" || approval.execution === "failed";
    const status = done ? approval.execution : approval.status;
    if ((APPROVAL_RANK[status] ?? 0) < (APPROVAL_RANK[card.dataset.status] ?? -1)) return;
    card.dataset.status = status;
    card.querySelector(".tess-card-status").textContent = "Status: " + status;
  }

  function approvalLink(body) {
    // Only the approver's own socket carries a link; it opens the page, which never acts by itself.
    const card = cardFor("approval-link", body.id, "Approval requested: " + body.action);
    const link = card.querySelector("a");
    // A resend or a fresh link from the inbox replaces the token: the older link no longer works.
    if (link) link.href = body.url;
    else card.append(el("a", { href: body.url, class: "tess-button", text: "Open the approval page" }));
  }

  function upsertHandoff(handoff) {
    const card = cardFor("handoff", handoff.id, "Hand-off to Mos");
    card.dataset.status = handoff.status;
    card.querySelector(".tess-card-status").textContent = "Status: " + handoff.status;
    if (handoff.result) {
      let result = card.querySelector(".tess-card-result");
      if (!result) card.append((result = el("div", { class: "tess-card-result" })));
      result.textContent = "Result: " + handoff.result;
    }
  }

  // --- /ws/me/: what concerns this person across sessions ---------------------------------------------

  let meRetry = 0;
  function connectMe() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + "/ws/me/");
    socket.addEventListener("open", () => (meRetry = 0));
    socket.addEventListener("message", (message) => {
      const event = JSON.parse(message.data);
      const body = event.body || {};
      if (event.kind === "approval") {
        upsertApproval(body);
        if (body.session_id === state.sessionId && body.execution === "executed") loadSessionStatus();
      } else if (event.kind === "snapshot") {
        // Sent first on every (re)connect: what waits on this person, read from the server's rows.
        for (const card of body.cards || []) window.Tess.upsertCard(card);
        for (const approval of [...(body.approvals_to_decide || []), ...(body.approvals_requested || [])]) {
          upsertApproval(approval);
        }
      } else if (event.kind === "approval.link") approvalLink(body);
      else if (event.kind === "card") window.Tess.upsertCard(body);
      else if (event.kind === "handoff") upsertHandoff(body);
      for (const listener of window.Tess.onMeEvent) listener(event);
    });
    socket.addEventListener("close", (close) => {
      if (close.code === 4401 || close.code === 4403) return;
      meRetry += 1;
      setTimeout(connectMe, Math.min(10000, 500 * 2 ** Math.min(meRetry, 5)));
    });
  }

  async function loadSessionStatus() {
    if (!state.sessionId) return;
    try {
      const session = await api("GET", "sessions/" + state.sessionId + "/");
      if (FINAL_SESSION[session.status]) showSessionStatus(session.status);
    } catch (error) {
      systemLine("The session could not be read: " + error.message);
    }
  }

  // --- start ------------------------------------------------------------------------------------------

  async function start() {
    try {
      await api("GET", "me/");
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

  window.Tess.cards = cards;
  window.Tess.cardFor = cardFor;
  window.Tess.plural = plural;
  window.Tess.onStart = window.Tess.onStart || [];
  window.Tess.onMeEvent = window.Tess.onMeEvent || [];
  window.Tess.selectSession = (id) => {
    picker.value = id;
    if (picker.value === id) selectSession(id);
  };
  document.addEventListener("DOMContentLoaded", start);
})();
