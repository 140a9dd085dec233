/* The fleet board (/board/): rows rendered by the server, kept current over /ws/board/ (no polling).

Each "row" frame is a session the viewer may see whose state changed: its row is updated in place, removed
when it no longer matches the page's filters, or added at the top of the first page. A change committed before
the socket joined (or while it was away) sends it no frame, so each time the socket says hello the page reads
its own rows again, as the inbox takes a snapshot on every (re)connect; "Live" shows once they are current.
Clicking a title opens the session in the Tess drawer through the drawer's own Tess.openSession
(static/tess/drawer.js). */
(function () {
  "use strict";
  const board = document.getElementById("tess-board");
  if (!board) return;
  const rows = document.getElementById("tess-board-rows");
  const live = document.getElementById("tess-board-live");
  const count = document.getElementById("tess-board-count");
  const filters = board.dataset;
  const firstPage = !new URLSearchParams(location.search).get("page") || new URLSearchParams(location.search).get("page") === "1";

  // --- times ---------------------------------------------------------------------------------------

  function ago(iso) {
    if (!iso) return "";
    const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (seconds < 60) return seconds + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min";
    if (seconds < 86400) return Math.floor(seconds / 3600) + " h";
    return Math.floor(seconds / 86400) + " d";
  }

  function refreshTimes() {
    for (const time of board.querySelectorAll(".tess-board-ago")) {
      const text = ago(time.getAttribute("datetime"));
      time.textContent = text ? text + " ago" : "";
      time.title = new Date(time.getAttribute("datetime")).toLocaleString();
    }
    for (const span of board.querySelectorAll(".tess-board-for")) {
      const text = ago(span.dataset.since);
      span.textContent = text ? "for " + text : "";
    }
  }

  // --- rows ----------------------------------------------------------------------------------------

  function matches(row) {
    if (filters.ended !== "1" && row.status !== "running") return false;
    if (filters.state && row.agent_state !== filters.state) return false;
    if (filters.provider && row.provider !== filters.provider) return false;
    if (filters.owner && row.owner !== filters.owner) return false;
    if (filters.q && !row.title.toLowerCase().includes(filters.q.toLowerCase())) return false;
    return true;
  }

  function cell(tag, label, className) {
    const node = document.createElement(tag);
    node.dataset.label = label;
    if (className) node.className = className;
    return node;
  }

  function fill(tr, row) {
    tr.className = "tess-board-row";
    tr.dataset.id = row.id;
    tr.dataset.status = row.status;
    tr.dataset.agentState = row.agent_state;
    const title = cell("th", "Session");
    title.scope = "row";
    const open = document.createElement("button");
    Object.assign(open, { type: "button", className: "tess-board-open", textContent: row.title, title: "Open in the Tess drawer" });
    open.dataset.id = row.id;
    title.append(open);
    const agent = cell("td", "Agent");
    const badge = document.createElement("span");
    badge.className = "tess-state";
    badge.dataset.state = row.agent_state;
    badge.textContent = row.agent_state.replace("_for_input", "");
    const since = document.createElement("span");
    since.className = "tess-board-for";
    since.dataset.since = row.agent_state_since || "";
    agent.append(badge, " ", since);
    const provider = cell("td", "Provider", "tess-board-provider");
    provider.textContent = row.provider;
    const owner = cell("td", "Owner", "tess-board-owner");
    owner.textContent = row.owner;
    const activity = cell("td", "Last activity");
    const time = document.createElement("time");
    time.className = "tess-board-ago";
    time.setAttribute("datetime", row.last_activity);
    activity.append(time);
    const pending = cell("td", "Waiting", "tess-board-pending");
    pending.textContent = row.pending || "—";
    const usage = cell("td", "Usage", "tess-board-usage");
    usage.textContent = row.usage;
    tr.replaceChildren(title, agent, provider, owner, activity, pending, usage);
    tr.classList.remove("tess-board-changed");
    void tr.offsetWidth; // restart the highlight
    tr.classList.add("tess-board-changed");
  }

  function setCount(delta) {
    count.textContent = String(Math.max(0, Number(count.textContent) + delta));
  }

  function apply(row) {
    const existing = rows.querySelector('tr[data-id="' + CSS.escape(row.id) + '"]');
    if (existing && !matches(row)) {
      existing.remove();
      setCount(-1);
    } else if (existing) {
      fill(existing, row);
    } else if (matches(row) && firstPage) {
      const empty = rows.querySelector(".tess-board-empty");
      if (empty) empty.remove();
      const tr = document.createElement("tr");
      fill(tr, row);
      rows.prepend(tr);
      setCount(1);
    }
    refreshTimes();
  }

  // --- the socket ----------------------------------------------------------------------------------

  // Frames that arrive while the rows are read again wait here, and are applied after them, in order: each
  // frame's row was read when it was sent, so the last one applied is never older than the page's rows.
  let held = null;

  async function catchUp() {
    const mine = [];
    held = mine;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      const freshRows = fresh.getElementById("tess-board-rows");
      const freshCount = fresh.getElementById("tess-board-count");
      if (freshRows && freshCount) {
        rows.replaceChildren(...freshRows.childNodes);
        count.textContent = freshCount.textContent;
      }
    } catch (error) {
      // The rows stay as they were and the frames still come: a failed read loses nothing that was shown.
    }
    if (held === mine) held = null; // a newer hello's read may have begun meanwhile: it keeps its own frames
    mine.forEach(apply);
    refreshTimes();
  }

  let retry = 0;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + "/ws/board/");
    socket.addEventListener("message", async (message) => {
      const frame = JSON.parse(message.data);
      if (frame.kind === "hello") {
        retry = 0;
        await catchUp();
        if (socket.readyState !== WebSocket.OPEN) return;
        live.dataset.state = "open";
        live.textContent = "Live";
      } else if (frame.kind === "row") {
        if (held) held.push(frame.body);
        else apply(frame.body);
      }
    });
    socket.addEventListener("close", (close) => {
      live.dataset.state = "closed";
      if (close.code === 4401 || close.code === 4403) {
        live.textContent = "Signed out: reload the page";
        return;
      }
      live.textContent = "Reconnecting…";
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 500 * 2 ** retry);
    });
  }

  // --- open in the drawer --------------------------------------------------------------------------

  function openInDrawer(id) {
    if (window.Tess && window.Tess.openSession) window.Tess.openSession(id);
  }

  rows.addEventListener("click", (event) => {
    const button = event.target.closest(".tess-board-open");
    if (button) openInDrawer(button.dataset.id);
  });

  refreshTimes();
  setInterval(refreshTimes, 1000);
  connect();
})();
