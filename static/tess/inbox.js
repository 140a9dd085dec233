/* The /inbox/ page: "Open in the drawer" for a session that waits, and the Web Push switch, which registers
   the service worker, subscribes with the server's VAPID key and sends the subscription (endpoint and keys)
   to the server; unsubscribing removes it on both sides. */
(function () {
  "use strict";
  document.querySelectorAll(".tess-open-session").forEach((button) =>
    button.addEventListener("click", () => window.Tess.openSession(button.dataset.session)),
  );
  const box = document.getElementById("tess-push");
  if (!box || !box.dataset.vapidKey) return;
  const state = document.getElementById("tess-push-state");
  const on = document.getElementById("tess-push-subscribe");
  const off = document.getElementById("tess-push-unsubscribe");
  const supported = "serviceWorker" in navigator && "PushManager" in window;

  function keyBytes(base64url) {
    const padded = base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  function say(text) {
    state.textContent = text;
  }

  async function registration() {
    return navigator.serviceWorker.register(box.dataset.swUrl || "/static/tess/push-sw.js");
  }

  on.addEventListener("click", async () => {
    if (!supported) return say("This browser does not support Web Push.");
    try {
      if ((await Notification.requestPermission()) !== "granted") return say("Notifications are blocked for this site.");
      const reg = await registration();
      const subscription = await reg.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(box.dataset.vapidKey),
      });
      const answer = await window.Tess.api("POST", "inbox/push-subscriptions/", subscription.toJSON());
      say(answer.subscriptions + " subscribed browser(s); this one included.");
    } catch (error) {
      say("Web Push could not be enabled: " + error.message);
    }
  });

  off.addEventListener("click", async () => {
    if (!supported) return;
    try {
      const reg = await registration();
      const subscription = await reg.pushManager.getSubscription();
      if (!subscription) return say("This browser was not subscribed.");
      const answer = await window.Tess.api("DELETE", "inbox/push-subscriptions/", { endpoint: subscription.endpoint });
      await subscription.unsubscribe();
      say(answer.subscriptions + " subscribed browser(s).");
    } catch (error) {
      say("Web Push could not be disabled: " + error.message);
    }
  });
})();
