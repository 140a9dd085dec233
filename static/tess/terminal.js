/* The drawer's terminal: a session's output drawn by xterm.js (served by Tess from frontend/, no CDN).

window.Tess.createTerminal(container, {onKeys}) returns a view, or null when xterm.js is not installed (the
drawer then shows the output as text). The view:
  write(data)            runtime output, bytes as the terminal got them (colours, cursor moves, screens)
  reset()                a blank terminal
  setText(on)            plain text of a runtime without a terminal: a line feed also returns the carriage
  size(cols, rows)       the pane's size (tmux): the font is scaled so its columns fit the panel;
                         size(null) fits columns and rows to the panel instead
  fit()                  again after the panel changed size (a ResizeObserver calls it)
  setInteractive(on)     keystrokes go to onKeys only while on; read-only otherwise
  atBottom(), scrollToBottom(), onScroll(fn), focus()
  terminal               the xterm.js Terminal (tests read its buffer through window.Tess.terminal)

xterm.js keeps its colours in <style> elements it creates. The page's Content-Security-Policy allows no
inline style elements, so those it makes while opening are stand-ins whose text is applied as constructed
style sheets (adoptedStyleSheets), which the policy does not govern: the policy stays as strict as it is. */
(function () {
  "use strict";
  const MIN_FONT = 7;
  const MAX_FONT = 14;
  const THEME = {
    background: "#1e1e1e",
    foreground: "#d4d4d4",
    cursor: "#d4d4d4",
    selectionBackground: "#264f78",
    // Brighter than xterm.js's defaults, so coloured text stays readable on the dark background.
    black: "#000000",
    red: "#f14c4c",
    green: "#23d18b",
    yellow: "#f5f543",
    blue: "#3b8eea",
    magenta: "#d670d6",
    cyan: "#29b8db",
    white: "#e5e5e5",
    brightBlack: "#8a8a8a",
    brightRed: "#ff6e6e",
    brightGreen: "#5af78e",
    brightYellow: "#ffff87",
    brightBlue: "#6cb6ff",
    brightMagenta: "#ff92df",
    brightCyan: "#9aedfe",
    brightWhite: "#ffffff",
  };

  /* A <tess-style> element that stands for a <style>: its text becomes an adopted style sheet. */
  function styleStandIn() {
    const node = document.createElement("tess-style");
    node.hidden = true;
    const sheet = new CSSStyleSheet();
    const apply = () => {
      try {
        sheet.replaceSync(node.textContent || "");
      } catch (error) {
        /* a rule this browser does not know: the rest of the sheet still applies */
      }
    };
    new MutationObserver(apply).observe(node, { childList: true, characterData: true, subtree: true });
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    const remove = node.remove.bind(node);
    node.remove = () => {
      // xterm.js removes its style elements when the terminal is disposed: so does the stand-in its sheet.
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
      remove();
    };
    return node;
  }

  function withStyleStandIns(fn) {
    const original = document.createElement;
    document.createElement = function (tag, options) {
      if (String(tag).toLowerCase() === "style") return styleStandIn();
      return original.call(document, tag, options);
    };
    try {
      return fn();
    } finally {
      document.createElement = original;
    }
  }

  function createTerminal(container, { onKeys } = {}) {
    if (typeof window.Terminal !== "function" || !window.FitAddon) return null;
    const terminal = new window.Terminal({
      convertEol: false,
      cursorBlink: false,
      disableStdin: true,
      scrollback: 5000,
      fontSize: 12,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
      theme: THEME,
      screenReaderMode: false,
    });
    const fitAddon = new window.FitAddon.FitAddon();
    terminal.loadAddon(fitAddon);
    withStyleStandIns(() => terminal.open(container));
    let paneSize = null;
    let interactive = false;
    terminal.onData((data) => {
      if (interactive && onKeys) onKeys(data);
    });

    function fit() {
      if (!container.clientWidth || !container.clientHeight) return; // hidden: fitted when shown
      if (!paneSize) {
        fitAddon.fit();
        return;
      }
      // As many columns as the pane has: the font follows the panel's width (within readable bounds).
      const proposed = fitAddon.proposeDimensions();
      if (proposed && proposed.cols) {
        const size = terminal.options.fontSize * (proposed.cols / paneSize.cols);
        const font = Math.max(MIN_FONT, Math.min(MAX_FONT, Math.floor(size * 4) / 4));
        if (font !== terminal.options.fontSize) terminal.options.fontSize = font;
      }
      if (terminal.cols !== paneSize.cols || terminal.rows !== paneSize.rows) terminal.resize(paneSize.cols, paneSize.rows);
    }

    const observer = new ResizeObserver(() => fit());
    observer.observe(container);

    return {
      terminal,
      write: (data) => terminal.write(data),
      reset() {
        terminal.reset();
        terminal.clear();
      },
      size(cols, rows) {
        paneSize = cols && rows ? { cols, rows } : null;
        // The pane's size: as tall as its rows. Otherwise the panel's height, filled.
        container.dataset.fit = paneSize ? "pane" : "panel";
        fit();
      },
      fit,
      setText(on) {
        // A runtime's plain text (no terminal in between) ends lines with LF alone: start each line anew.
        terminal.options.convertEol = !!on;
      },
      setInteractive(on) {
        interactive = !!on;
        terminal.options.disableStdin = !interactive;
        terminal.options.cursorBlink = interactive;
      },
      atBottom: () => terminal.buffer.active.viewportY >= terminal.buffer.active.baseY,
      scrollToBottom: () => terminal.scrollToBottom(),
      onScroll: (fn) => terminal.onScroll(fn),
      focus: () => terminal.focus(),
    };
  }

  window.Tess = window.Tess || {};
  window.Tess.createTerminal = createTerminal;
})();
