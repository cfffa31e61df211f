// svc dashboard: sends control requests and keeps the overview figures fresh. No dependencies.
"use strict";

function say(text, bad) {
  const box = document.getElementById("message");
  if (!box) return;
  box.textContent = text;
  box.className = bad ? "message bad" : "message good";
}

async function post(path, body) {
  const init = { method: "POST", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = body;
  }
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : response.statusText;
    throw new Error(message);
  }
  return data;
}

function refreshOverview(status) {
  const set = (field, value) => {
    document.querySelectorAll('[data-field="' + field + '"]').forEach((el) => { el.textContent = value; });
  };
  set("optimization", status.optimization);
  set("quality", status.quality);
  set("uptime", status.uptime_seconds + " s");
  document.querySelectorAll("[data-body]").forEach((button) => {
    try {
      const mode = JSON.parse(button.dataset.body).mode;
      if (mode) button.setAttribute("aria-pressed", String(mode === status.quality));
    } catch (_) { /* not a quality button */ }
  });
}

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-post]");
  if (!button || button.disabled) return;
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  try {
    const data = await post(button.dataset.post, button.dataset.body);
    if (data && data.optimization !== undefined) {
      refreshOverview(data);
      say("Done: optimisation " + data.optimization + ", quality " + data.quality + ".");
    } else if (data && data.stopping) {
      say("Stopping. This page stops answering once the daemon has shut down.");
    } else {
      say("Done.");
    }
  } catch (error) {
    say(String(error.message || error), true);
  }
});

document.addEventListener("submit", async (event) => {
  if (event.target.id !== "reindex-form") return;
  event.preventDefault();
  const path = document.getElementById("reindex-path").value.trim();
  say("Indexing…");
  try {
    const data = await post("/api/control/repos/reindex", path ? JSON.stringify({ path }) : undefined);
    const lines = data.reindexed.map((r) => r.last_error
      ? r.path + ": " + r.last_error
      : r.path + ": " + r.files + " files, " + r.tokens + " tokens, " + r.parsed + " re-parsed");
    say(lines.join("; "));
    setTimeout(() => window.location.reload(), 800);
  } catch (error) {
    say(String(error.message || error), true);
  }
});

// Keep the overview cards current on the dashboard and the control panel.
if (document.querySelector('[data-field="optimization"]')) {
  setInterval(async () => {
    try {
      const response = await fetch("/api/control/status");
      if (response.ok) refreshOverview(await response.json());
    } catch (_) { /* the daemon stopped; leave the page as it is */ }
  }, 5000);
}

// Sections that load after the page (a run's report takes a moment to compute).
document.querySelectorAll("[data-load]").forEach(async (section) => {
  try {
    const response = await fetch(section.dataset.load);
    section.innerHTML = await response.text();
  } catch (error) {
    section.innerHTML = "<h2>Report</h2><p class=\"error\">" + String(error) + "</p>";
  }
});
