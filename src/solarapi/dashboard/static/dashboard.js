// Progressive enhancement only: every page works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // The key-created page answers a POST. Point the address bar at the key list, so a reload
  // shows the list (display forms only) instead of offering to send the form again.
  const created = document.querySelector("[data-replace-url]");
  if (created && window.history && window.history.replaceState) {
    window.history.replaceState(null, "", created.getAttribute("data-replace-url"));
  }

  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const target = document.querySelector(button.getAttribute("data-copy"));
      const status = button.parentElement.querySelector(".copy-status");
      if (!target) return;
      const text = target.textContent.trim();
      let copied = false;
      try {
        await navigator.clipboard.writeText(text);
        copied = true;
      } catch (_) {
        // Clipboard API refused (no HTTPS, permissions): select the text for Ctrl+C instead.
        const range = document.createRange();
        range.selectNodeContents(target);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      if (status) status.textContent = copied ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy.";
      button.textContent = copied ? "Copied" : "Copy";
    });
  }

  // Chart points: show the value of a bar or point when it is focused or tapped.
  for (const chart of document.querySelectorAll("figure.chart")) {
    const readout = chart.querySelector(".chart-readout");
    if (!readout) continue;
    for (const mark of chart.querySelectorAll("[data-label]")) {
      const show = () => { readout.textContent = mark.getAttribute("data-label"); };
      mark.addEventListener("mouseenter", show);
      mark.addEventListener("focus", show);
      mark.addEventListener("click", show);
    }
  }
});
