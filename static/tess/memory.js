/* Memory in the drawer (seed 002): confirm cards, and the collapsed Memory disclosure.

Nothing is remembered or forgotten without a confirmed card; every outcome shown is the server's result
(including "0 notes deleted"), never inferred from what the card proposed. */
(function () {
  "use strict";
  const { api, el, plural } = window.Tess;
  const $ = (id) => document.getElementById(id);
  const details = $("tess-memory");
  if (!details) return;
  const body = $("tess-memory-body");
  const dialog = $("tess-confirm");
  const dialogText = $("tess-confirm-text");
  const dialogOk = $("tess-confirm-ok");
  const dialogCancel = $("tess-confirm-cancel");
  const OP_LABEL = {
    remember: "Remember",
    correct: "Correct",
    reauthorize: "Renew",
    forget: "Forget",
    forget_all: "Forget all notes",
  };

  // --- the result of a decided card --------------------------------------------------------------------

  function outcomeText(result) {
    if (result.error) return "Not applied: " + result.error.message;
    switch (result.outcome) {
      case "deleted":
        if (result.deleted_count === undefined) return "Forgotten.";
        // The messages and summaries in your sessions that carried the words now read "(forgotten memory request)".
        return plural(result.deleted_count, "note deleted", "notes deleted") +
          (result.redacted_count ? "; " + plural(result.redacted_count, "message redacted", "messages redacted") + " in your sessions." : "");
      case "created":
        return "Remembered.";
      case "revised":
        return result.row ? "Corrected: now revision " + result.row.revision + "." : "Corrected.";
      case "reauthorized":
        return "Reauthorized: the source is renewed; content and revision unchanged.";
      case "dismissed":
        return "Dismissed: nothing was changed.";
      default:
        return "Done (" + String(result.outcome).replace(/_/g, " ") + ").";
    }
  }

  async function decide(card, id, verb) {
    card.querySelectorAll(".tess-card-actions button").forEach((b) => (b.disabled = true));
    const status = card.querySelector(".tess-card-status");
    try {
      const result = await api("POST", "cards/" + id + "/" + verb + "/");
      card.dataset.status = result.card.status;
      status.textContent = outcomeText(result);
      window.Tess.settleCard(card);
      $("tess-card-history").open = true; // the card just decided stays in sight, with its outcome
      if (details.open) loadDisclosure();
    } catch (error) {
      if (error.status === 409) {
        // Decided meanwhile (another tab, the inbox, the CLI): show what the server stored instead.
        await refreshCard(id);
        return;
      }
      status.textContent = "Not done: " + error.message;
      card.querySelectorAll(".tess-card-actions button").forEach((b) => (b.disabled = false));
    }
  }

  const CATEGORY = {
    preferences: "a preference",
    standing_initiative: "your standing initiative",
    pinned_contexts: "a pinned context",
  };
  const CATEGORY_NAME = {
    preferences: "Preference",
    standing_initiative: "Standing initiative",
    pinned_contexts: "Pinned context",
  };
  window.Tess.categoryWords = (category) => CATEGORY_NAME[category] || category;

  /* The card's title in words: what confirming it would do. A decided card's payload keeps ids only. */
  function titleOf(payload) {
    if (payload.op === "forget_all") return "Forget all your notes";
    let text = (OP_LABEL[payload.op] || "Change") + " " + (CATEGORY[payload.category] || "a note");
    if (payload.value) text += ": “" + payload.value + "”";
    return text;
  }

  function storedOutcome(detail) {
    const outcome = detail.outcome || {};
    if (!outcome.outcome && !outcome.error) return "";
    return outcomeText({ ...outcome, error: outcome.error && { message: outcome.error.message || outcome.error.code } });
  }

  async function upsertCard(data) {
    if (data.kind && data.kind !== "memory") return;
    const payload = data.payload || (data.op ? data : null);
    const card = window.Tess.cardFor("memory", data.id, payload ? titleOf(payload) : "");
    const title = card.querySelector(".tess-card-title");
    if (data.payload) card.dataset.titled = "1";
    if (!title.textContent) title.textContent = "Memory card";
    if (window.Tess.isStale(card, data.status)) return;
    const status = card.querySelector(".tess-card-status");
    const changed = card.dataset.status !== data.status;
    card.dataset.status = data.status;
    if (data.status === "pending") {
      if (!card.querySelector(".tess-card-actions")) {
        status.textContent = "Nothing changes until you confirm.";
        card.append(
          el(
            "div",
            { class: "tess-card-actions" },
            el("button", { type: "button", class: "default", text: "Confirm", onclick: () => decide(card, data.id, "confirm") }),
            el("button", { type: "button", text: "Dismiss", onclick: () => decide(card, data.id, "dismiss") }),
          ),
        );
      }
      window.Tess.settleCard(card);
      if (!data.payload && !card.dataset.titled) await refreshCard(data.id);
      return;
    }
    window.Tess.settleCard(card);
    if (data.payload !== undefined) {
      // A full row from the API: its stored outcome, not a guess from what the card proposed.
      status.textContent = storedOutcome(data) || (data.status === "dismissed" ? "Dismissed: nothing was changed." : "Status: " + data.status);
    } else if (changed || !status.textContent) {
      await refreshCard(data.id);
    }
  }
  window.Tess.upsertCard = upsertCard;

  async function refreshCard(id) {
    try {
      await upsertCard(await api("GET", "cards/" + id + "/"));
    } catch (error) {
      const card = window.Tess.cards.querySelector('[data-kind="memory"][data-id="' + CSS.escape(id) + '"]');
      if (card) card.querySelector(".tess-card-status").textContent = "This card could not be read: " + error.message;
    }
  }
  window.Tess.refreshCard = refreshCard;

  // --- explicit confirmations ----------------------------------------------------------------------------

  let confirmResolve = null;
  let returnFocus = null;

  function ask(text, okLabel) {
    returnFocus = document.activeElement;
    dialogText.textContent = text;
    dialogOk.textContent = okLabel;
    dialog.hidden = false;
    dialogCancel.focus();
    return new Promise((resolve) => (confirmResolve = resolve));
  }

  function answer(yes) {
    if (dialog.hidden) return;
    dialog.hidden = true;
    const resolve = confirmResolve;
    confirmResolve = null;
    if (returnFocus && document.contains(returnFocus)) returnFocus.focus();
    if (resolve) resolve(yes);
  }

  dialogOk.addEventListener("click", () => answer(true));
  dialogCancel.addEventListener("click", () => answer(false));
  dialog.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      answer(false);
    } else if (event.key === "Tab") {
      // Keep focus inside the confirmation while it is open (two buttons: Tab and Shift+Tab alternate).
      event.preventDefault();
      (document.activeElement === dialogCancel ? dialogOk : dialogCancel).focus();
    }
  });

  /* Propose a card and, the operator having confirmed in the dialog, confirm it: the line shown is the
     server's result of applying it. */
  async function act(proposal, status) {
    status.textContent = "Working…";
    try {
      const card = await api("POST", "memory/cards/", proposal);
      const result = await api("POST", "cards/" + card.id + "/confirm/");
      status.textContent = outcomeText(result);
    } catch (error) {
      status.textContent = "Not done: " + error.message;
    }
    await loadDisclosure(status.textContent);
  }

  // --- the disclosure ------------------------------------------------------------------------------------

  function dl(pairs) {
    const list = el("dl", { class: "tess-dl" });
    for (const [term, value] of pairs) {
      list.append(el("dt", { text: term }), el("dd", { text: value === null || value === undefined || value === "" ? "—" : String(value) }));
    }
    return list;
  }

  function when(value) {
    return value ? new Date(value).toLocaleString() : "never";
  }

  function rowView(row, lineage, status) {
    const name = row.category + " / " + row.slot;
    const history = lineage.length;
    const correctInput = el("input", { type: "text", maxlength: "280", value: row.value, "aria-label": "New value for " + name });
    const item = el(
      "li",
      { class: "tess-note", "data-memory-id": row.memory_id },
      el("div", { class: "tess-note-head" },
        el("strong", { text: name }),
        el("span", { class: "tess-badge " + (row.active ? "tess-active" : "tess-expired"), text: row.active ? "active" : "expired" })),
      el("blockquote", { text: row.value }),
      dl([
        ["Memory id", row.memory_id],
        ["Revision", row.revision],
        ["Predecessor revision", row.predecessor_revision],
        ["Source", row.source_ref],
        ["Reference", row.ref],
        ["Confirmed", when(row.confirmed_at)],
        ["Latest reauthorization", row.reauthorized_ref + " at " + when(row.reauthorized_at)],
        ["Salience", row.salience],
        ["Expires", row.expires_at ? when(row.expires_at) : "kept until forgotten"],
        ["Updated", when(row.updated_at)],
        ["Last used in a prompt", when(row.last_used_at)],
      ]),
      el("div", { class: "tess-note-actions" },
        correctInput,
        el("button", {
          type: "button",
          text: "Correct",
          onclick: async () => {
            const value = correctInput.value;
            if (await ask('Correct ' + name + ' from "' + row.value + '" to "' + value + '"? The current value moves to the superseded revisions.', "Correct")) {
              act({ op: "correct", category: row.category, slot: row.slot, value }, status);
            }
          },
        }),
        el("button", {
          type: "button",
          text: "Reauthorize",
          onclick: async () => {
            if (await ask("Reauthorize the source of " + name + '? Its expiry is renewed from now; the value "' + row.value + '" and revision ' + row.revision + " stay as they are.", "Reauthorize")) {
              act({ op: "reauthorize", category: row.category, slot: row.slot }, status);
            }
          },
        }),
        el("button", {
          type: "button",
          class: "tess-danger",
          text: "Delete",
          onclick: async () => {
            const text = "Delete the note " + name + ' ("' + row.value + '") and its ' + plural(history, "superseded revision", "superseded revisions") + "? This cannot be undone.";
            if (await ask(text, "Delete this note")) act({ op: "forget", category: row.category, slot: row.slot }, status);
          },
        })),
    );
    return item;
  }

  function historyView(history) {
    const section = el("details", { class: "tess-history" }, el("summary", { text: "Superseded revisions (" + history.length + ")" }));
    const list = el("ul", { class: "tess-notes" });
    for (const old of history) {
      list.append(
        el("li", { class: "tess-note tess-superseded" },
          el("strong", { text: old.category + " / " + old.slot + " — revision " + old.revision }),
          el("blockquote", { text: old.value }),
          dl([
            ["Memory id", old.memory_id],
            ["Successor revision", old.successor_revision],
            ["Predecessor revision", old.predecessor_revision],
            ["Source", old.source_ref],
            ["Confirmed", when(old.confirmed_at)],
            ["Superseded", when(old.superseded_at)],
          ])),
      );
    }
    section.append(history.length ? list : el("p", { text: "No superseded revisions." }));
    return section;
  }

  function policyView(snapshot) {
    const items = snapshot.categories.map((c) =>
      el("li", {
        text: c.category + ": up to " + c.ceiling + " notes, salience " + c.salience + ", " +
          (c.retention_days ? "expires " + c.retention_days + " days after confirmation" : "kept until forgotten"),
      }),
    );
    return el("div", { class: "tess-policy" },
      el("p", { text: snapshot.memory_scope === "profile"
        ? "Scope: operator profile — only you read these notes, and only your own turns recall them."
        : "Scope: session only — operator memory is not served; nothing is recalled or stored." }),
      el("ul", {}, ...items),
      el("p", { text: "Recall uses at most " + snapshot.prompt_ceilings.rows + " active notes and " + snapshot.prompt_ceilings.characters + " characters per turn." }),
      el("p", { text: "Erasure: one note — " + snapshot.erasure.one_note + "; everything — " + snapshot.erasure.everything + "; administrators — " + snapshot.erasure.administrators + "." }));
  }

  async function loadDisclosure(message) {
    const status = el("p", { class: "tess-memory-status", role: "status", text: message || "" });
    let snapshot;
    try {
      snapshot = await api("GET", "memory/");
    } catch (error) {
      body.replaceChildren(el("p", { class: "tess-error", text: "Memory could not be read: " + error.message }));
      return;
    }
    window.Tess.setScope(snapshot.memory_scope);
    const lineage = {};
    for (const old of snapshot.history) (lineage[old.memory_id] = lineage[old.memory_id] || []).push(old);
    const rows = el("ul", { class: "tess-notes", "aria-label": "Your current notes" });
    for (const row of snapshot.rows) rows.append(rowView(row, lineage[row.memory_id] || [], status));
    const total = snapshot.rows.length;
    const superseded = snapshot.history.length;
    const deleteAll = el("button", {
      type: "button",
      class: "tess-danger",
      text: "Delete all my notes",
      onclick: async () => {
        const text = "Delete all " + plural(total, "current note", "current notes") + " and " + plural(superseded, "superseded revision", "superseded revisions") + " of your operator memory? This cannot be undone.";
        if (await ask(text, "Delete all")) act({ op: "forget_all" }, status);
      },
    });
    body.replaceChildren(
      status,
      policyView(snapshot),
      el("h4", { text: "Current notes (" + total + ")" }),
      total ? rows : el("p", { text: "You have no notes." }),
      historyView(snapshot.history),
      el("div", { class: "tess-memory-actions" }, deleteAll),
    );
  }

  details.addEventListener("toggle", () => {
    if (details.open) loadDisclosure();
  });

  window.Tess.onStart = window.Tess.onStart || [];
  window.Tess.onStart.push(async () => {
    try {
      window.Tess.setScope((await api("GET", "memory/")).memory_scope);
    } catch (error) {
      window.Tess.setScope("session");
    }
  });
})();
