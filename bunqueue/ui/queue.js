// `/ui/queues/<name>`: the queue's jobs by state, paged, searchable by id or name; its controls.
// The state, page and search live in the query string, so back/forward and reloads keep them.

import { act, get, q, STREAM_OPEN } from "./api.js";
import { append, clear, confirmAction, h, link, notice, section, table, when } from "./dom.js";

const STATES = ["waiting", "prioritized", "delayed", "active", "completed", "failed", "dlq"];
const PAGE = 20;
// How many jobs of a state a name search looks through.
const SEARCH_SCAN = 1000;
const ID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function jobRows(jobs) {
  return jobs.map((job) => h("tr", { "data-job": job.id },
    h("td", {}, link(`/ui/jobs/${q(job.id)}`, h("code", {}, job.id))),
    h("td", {}, job.name ?? ""), h("td", {}, job.state ?? ""), h("td", { class: "num" }, job.priority ?? 0),
    h("td", { class: "num" }, job.attempts ?? 0), h("td", {}, when(job.createdAt)),
    h("td", { class: "clip" }, job.failedReason ?? "")));
}

async function jobsOf(name, state, offset, limit) {
  if (state === "dlq") {
    const page = await get(`/queues/${q(name)}/dlq?offset=${offset}&limit=${limit}`);
    const jobs = (page.entries || []).map((e) => ({ ...e.job, state: "dlq", failedReason: e.error }));
    return { jobs, total: page.total };
  }
  const reply = await get(`/queues/${q(name)}/jobs/list?state=${state}&offset=${offset}&limit=${limit}`);
  return { jobs: reply.jobs || [], total: null };
}

// The queue's buttons and forms; run(label, method, path, body, question) performs one change.
function queueControls(name, run, pauseButton) {
  const path = `/queues/${q(name)}`;
  pauseButton.addEventListener("click", () => {
    const paused = pauseButton.dataset.paused === "true";
    run(paused ? "Resume" : "Pause", "POST", `${path}/${paused ? "resume" : "pause"}`);
  });
  const rateLimit = h("input", { type: "number", min: 1, id: "rate-max", placeholder: "jobs" });
  const rateWindow = h("input", { type: "number", min: 1, id: "rate-window", value: 1000 });
  const concurrency = h("input", { type: "number", min: 1, id: "concurrency" });
  const cleanState = h("select", { id: "clean-state" }, ["completed", "failed", "waiting", "delayed"].map(
    (s) => h("option", { value: s }, s)));

  return h("div", { class: "controls" },
    h("div", { class: "row" }, pauseButton,
      h("button", { type: "button", class: "danger", onclick: () => run("Drain", "POST", `${path}/drain`,
        undefined, `Drain "${name}"? Its waiting and delayed jobs are removed.`) }, "Drain"),
      h("label", { for: "clean-state" }, "Clean"), cleanState,
      h("button", { type: "button", class: "danger", onclick: () => run("Clean", "POST", `${path}/clean`,
        { grace: 0, state: cleanState.value }, `Remove every ${cleanState.value} job of "${name}"?`) }, "Clean"),
      h("button", { type: "button", onclick: () => run("Retry DLQ", "POST", `${path}/dlq/retry`, {}) },
        "Retry DLQ"),
      h("button", { type: "button", class: "danger", onclick: () => run("Purge DLQ", "POST",
        `${path}/dlq/purge`, undefined, `Purge the dead-letter queue of "${name}"?`) }, "Purge DLQ")),
    h("form", { class: "row", onsubmit: (e) => {
      e.preventDefault();
      run("Rate limit", "PUT", `${path}/rate-limit`,
        { limit: Number(rateLimit.value), duration: Number(rateWindow.value) });
    } }, h("label", { for: "rate-max" }, "Rate limit"), rateLimit, h("label", { for: "rate-window" }, "per ms"),
    rateWindow, h("button", { type: "submit" }, "Set"),
    h("button", { type: "button", class: "quiet", onclick: () => run("Clear rate limit", "DELETE",
      `${path}/rate-limit`) }, "Clear")),
    h("form", { class: "row", onsubmit: (e) => {
      e.preventDefault();
      run("Concurrency", "PUT", `${path}/concurrency`, { concurrency: Number(concurrency.value) });
    } }, h("label", { for: "concurrency" }, "Concurrency"), concurrency, h("button", { type: "submit" }, "Set"),
    h("button", { type: "button", class: "quiet", onclick: () => run("Clear concurrency", "DELETE",
      `${path}/concurrency`) }, "Clear")));
}

export function queueView(view, live, params, navigate) {
  const name = params[0];
  const search = new URLSearchParams(location.search);
  const state = STATES.includes(search.get("state")) ? search.get("state") : "waiting";
  const page = Math.max(0, parseInt(search.get("page") || "0", 10) || 0);
  const term = search.get("q") || "";
  const base = `/ui/queues/${q(name)}`;
  const urlFor = (changes) => {
    const next = new URLSearchParams({ state, page: String(page), q: term, ...changes });
    for (const [k, v] of [...next]) if (!v || (k === "page" && v === "0")) next.delete(k);
    const text = next.toString();
    return text ? `${base}?${text}` : base;
  };

  const status = h("p", { class: "notice", role: "status" });
  const counts = h("dl", { class: "counts" });
  const info = h("p", { class: "muted" });
  const list = h("div", {}, h("p", { class: "muted" }, "Loading jobs…"));
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });

  async function run(label, method, path, body, question) {
    if (question && !(await confirmAction(question))) return;
    try {
      const reply = await act(method, path, body);
      notice(status, `${label}: done${reply.count !== undefined ? ` (${reply.count})` : ""}`, "ok");
      await Promise.all([loadHeader(), loadJobs()]);
    } catch (err) {
      notice(status, `${label}: ${err.message}`, "error");
      live.failed(err);
    }
  }

  const pauseButton = h("button", { type: "button" }, "Pause");
  const controls = queueControls(name, run, pauseButton);
  const searchInput = h("input", { type: "search", id: "search", value: term, placeholder: "Job id or name" });

  const tabs = h("nav", { class: "tabs", "aria-label": "Job states" }, STATES.map((s) =>
    h("a", { href: urlFor({ state: s, page: "0" }), "aria-current": s === state ? "page" : null }, s,
      h("span", { class: "badge", "data-tab": s }, ""))));
  const searchForm = h("form", { class: "row", role: "search", onsubmit: (e) => {
    e.preventDefault();
    navigate(urlFor({ q: searchInput.value.trim(), page: "0" }));
  } }, h("label", { for: "search" }, "Search"), searchInput, h("button", { type: "submit" }, "Find"));

  clear(view);
  append(view, h("p", { class: "crumbs" }, link("/ui/", "Queues"), " / "), h("h1", {}, name), status,
    section("Counts", counts, info), section("Controls", controls),
    section("Jobs", tabs, searchForm, list, pager));

  async function loadHeader() {
    const [dash, limits] = await Promise.all([get(`/dashboard/queues/${q(name)}`), get(`/queues/${q(name)}/limits`)]);
    const c = dash.counts || {};
    const dlqStats = await get(`/queues/${q(name)}/dlq?limit=0`);
    const values = { ...c, dlq: dlqStats.total ?? 0 };
    clear(counts);
    for (const s of STATES) {
      append(counts, h("div", {}, h("dt", {}, s), h("dd", { "data-count": s }, values[s] ?? 0)));
      const badge = tabs.querySelector(`[data-tab="${s}"]`);
      if (badge) badge.textContent = String(values[s] ?? 0);
    }
    const paused = !!dash.paused;
    pauseButton.textContent = paused ? "Resume" : "Pause";
    pauseButton.dataset.paused = String(paused);
    const l = (limits.data || {}).limits || {};
    info.textContent = `${paused ? "Paused" : "Running"} · rate limit ${l.rateLimit ? `${l.rateLimit.max} per ${l.rateLimit.duration} ms` : "none"} · concurrency ${l.concurrencyLimit || "unlimited"}`;
  }

  // Loads may overlap (an event, an action); only the latest one draws.
  let latest = 0;

  async function loadJobs() {
    const mine = ++latest;
    let jobs;
    let more;
    let total = null;
    if (term) {
      // Only an id-shaped term is looked up by id: any other would be a 404 for every name search.
      const byId = ID_SHAPE.test(term) ? await get(`/jobs/${q(term)}`) : null;
      if (byId && byId.ok && byId.job.queue === name) {
        jobs = [byId.job];
      } else {
        const scanned = (await jobsOf(name, state, 0, SEARCH_SCAN)).jobs;
        const needle = term.toLowerCase();
        const found = scanned.filter((j) => String(j.name ?? "").toLowerCase().includes(needle)
          || String(j.id).startsWith(term));
        total = found.length;
        jobs = found.slice(page * PAGE, page * PAGE + PAGE);
      }
    } else {
      const got = await jobsOf(name, state, page * PAGE, PAGE + 1);
      jobs = got.jobs.slice(0, PAGE);
      more = got.jobs.length > PAGE;
      total = got.total;
    }
    if (total !== null) more = (page + 1) * PAGE < total;
    if (mine !== latest) return;
    clear(list);
    if (!jobs.length) append(list, h("p", { class: "muted" }, term ? `No ${state} job matches "${term}".` : `No ${state} job.`));
    else append(list, table(["Id", "Name", "State", "Priority", "Attempts", "Created", "Failure"], jobRows(jobs)));
    clear(pager);
    append(pager,
      page > 0 ? link(urlFor({ page: String(page - 1) }), "← Previous") : null,
      h("span", {}, `Page ${page + 1}`),
      more ? link(urlFor({ page: String(page + 1) }), "Next →") : null);
  }

  let refresh = 0;
  live.listen((event, data) => {
    if (event === STREAM_OPEN) {
      loadHeader().catch(live.failed);
      loadJobs().catch(live.failed);
    } else if (data && data.queue === name && event.startsWith("queue:")) {
      clearTimeout(refresh);
      refresh = setTimeout(() => loadHeader().catch(live.failed), 100);
    }
  });
  loadHeader().catch(live.failed);
  loadJobs().catch(live.failed);
  return () => clearTimeout(refresh);
}
