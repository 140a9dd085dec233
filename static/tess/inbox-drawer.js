/* The drawer's Inbox: what waits on this person, kept from /ws/me/ — the snapshot on every (re)connect, then
   inbox.item / inbox.left pushes; never polled. Its count sits on the Tess button. A one-time approval link is
   minted on click (POST, CSRF) and only then followed; it is never kept in the page. */
(function () {
  "use strict";
  const { api, el } = window.Tess;
  const NOTIFY_KEY = "tess.inbox.notify";
  const list = document.getElementById("tess-inbox");
  if (!list) return;
  const empty = document.getElementById("tess-inbox-empty");
  const count = document.getElementById("tess-inbox-count");
  const countText = document.getElementById("tess-inbox-count-text");
  const optin = document.getElementById("tess-notify-optin");
  const drawer = document.getElementById("tess-drawer");
  const items = new Map();
  let browserNotices = true; // the server-side preference; read once at start

  function refreshCount() {
    const n = items.size;
    count.textContent = String(n);
    count.hidden = n === 0;
    countText.textContent = n ? n + (n === 1 ? " item" : " items") + " in your inbox" : "Nothing in your inbox";
    empty.hidden = n > 0;
  }

  async function act(button, run) {
    button.disabled = true;
    try {
      await run();
    } catch (error) {
      window.Tess.systemLine("Not done: " + error.message);
      button.disabled = false;
    }
  }

  function actions(item) {
    const box = el("div", { class: "tess-inbox-actions" });
    if (item.kind === "approval_to_decide") {
      const open = el("button", { type: "button", text: "Open approval page" });
      open.addEventListener("click", () =>
        act(open, async () => {
          const minted = await api("POST", "approvals/" + item.id + "/open/");
          window.location.assign(minted.url);
        }),
      );
      box.append(open);
    } else if (item.kind === "approval_requested") {
      const resend = el("button", { type: "button", text: "Resend to approvers" });
      resend.addEventListener("click", () =>
        act(resend, async () => {
          const done = await api("POST", "approvals/" + item.id + "/resend/");
          window.Tess.systemLine("Sent a fresh link to " + window.Tess.plural(done.sent, "approver", "approvers") + ".");
          resend.disabled = false;
        }),
      );
      box.append(resend);
    } else if (item.kind === "card") {
      for (const [label, verb] of [["Confirm", "confirm"], ["Dismiss", "dismiss"]]) {
        const button = el("button", { type: "button", text: label });
        button.addEventListener("click", () =>
          act(button, async () => {
            const result = await api("POST", "cards/" + item.id + "/" + verb + "/");
            window.Tess.systemLine("Card " + (result.outcome || verb) + ".");
          }),
        );
        box.append(button);
      }
    } else if (item.kind === "session_waiting") {
      const open = el("button", { type: "button", text: "Open session" });
      open.addEventListener("click", () => window.Tess.selectSession(item.session_id || item.id));
      box.append(open);
    }
    return box;
  }

  function add(item) {
    const existing = items.get(item.key);
    if (existing) existing.node.remove();
    const node = el(
      "li",
      { class: "tess-inbox-item", "data-key": item.key, "data-kind": item.kind, "aria-label": item.title },
      el("div", { class: "tess-inbox-title" }, ...window.Tess.richText(item.title)),
      actions(item),
    );
    list.prepend(node);
    items.set(item.key, { item, node });
    refreshCount();
  }

  function remove(key) {
    const existing = items.get(key);
    if (!existing) return;
    existing.node.remove();
    items.delete(key);
    refreshCount();
  }

  function notify(item) {
    if (!browserNotices || localStorage.getItem(NOTIFY_KEY) !== "1") return;
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    if (!document.hidden && !drawer.hidden) return; // they are looking at it already
    const notice = new Notification("Tess: " + item.title, { body: "Open your inbox", tag: item.key });
    notice.addEventListener("click", () => window.location.assign(item.url));
  }

  window.Tess.onMeEvent = window.Tess.onMeEvent || [];
  window.Tess.onMeEvent.push((event) => {
    const body = event.body || {};
    if (event.kind === "snapshot") {
      for (const { node } of items.values()) node.remove();
      items.clear();
      // The snapshot lists newest first within each kind; prepend in reverse to keep that order.
      for (const item of [...(body.inbox || [])].reverse()) add(item);
      refreshCount();
    } else if (event.kind === "inbox.item") {
      const fresh = !items.has(body.key);
      add(body);
      if (fresh && body.notify) notify(body);
    } else if (event.kind === "inbox.left") {
      remove(body.key);
    }
  });

  function showOptin() {
    optin.hidden = !("Notification" in window) || localStorage.getItem(NOTIFY_KEY) === "1" || !browserNotices;
  }

  optin.addEventListener("click", async () => {
    const permission = await Notification.requestPermission();
    if (permission === "granted") localStorage.setItem(NOTIFY_KEY, "1");
    showOptin();
  });

  window.Tess.onStart = window.Tess.onStart || [];
  window.Tess.onStart.push(async () => {
    try {
      browserNotices = (await api("GET", "inbox/settings/")).browser;
    } catch (error) {
      browserNotices = false;
    }
    showOptin();
  });
  refreshCount();
})();
