// `/ui/`: every queue with its counts, paused state and limits; throughput and latency; workers, crons and
// storage. Counts follow the event stream (`queue:counts`, `queue:paused`/`resumed`) without a reload.

import { get, q, STREAM_OPEN } from "./api.js";
import { lineChart } from "./chart.js";
import { ago, append, clear, h, link, section, table, when } from "./dom.js";

const COUNTS = ["waiting", "prioritized", "delayed", "active", "completed", "failed"];
// Events after which the queue list itself (not only its counts) is read again, coalesced over 100 ms.
const RELOAD_ON = new Set(["queue:created", "queue:drained", "queue:obliterated", "queue:removed", "ratelimit:set",
  "ratelimit:cleared", "concurrency:set", "concurrency:cleared"]);
const SAMPLE_MS = 5000;
const SAMPLES_KEPT = 120;
// Kept across views: the chart goes on where it was when the operator comes back.
const samples = [];

function limitsText(limits) {
  if (!limits) return "—";
  const parts = [];
  if (limits.rateLimit) parts.push(`rate ${limits.rateLimit.max}/${limits.rateLimit.duration}ms`);
  if (limits.concurrencyLimit) parts.push(`concurrency ${limits.concurrencyLimit}`);
  return parts.length ? parts.join(", ") : "none";
}

function limitsOf(reply) {
  return reply && reply.data ? reply.data.limits : null;
}

function queueRow(row, dlq, limits) {
  const cells = {};
  for (const name of COUNTS) cells[name] = h("td", { class: "num", "data-count": name });
  cells.dlq = h("td", { class: "num", "data-count": "dlq" });
  cells.paused = h("td", { "data-field": "paused" });
  cells.limits = h("td", { "data-field": "limits" });
  const tr = h("tr", { "data-queue": row.name },
    h("th", { scope: "row" }, link(`/ui/queues/${q(row.name)}`, row.name)),
    COUNTS.map((name) => cells[name]), cells.dlq, cells.paused, cells.limits);
  // When an event last changed the row's counts or state.
  const made = { tr, cells, heard: 0 };
  fill(made, row, dlq, limits);
  return made;
}

function fill(made, row, dlq, limits) {
  for (const name of COUNTS) made.cells[name].textContent = String(row.counts[name] ?? 0);
  made.cells.dlq.textContent = String(dlq ?? 0);
  made.cells.paused.textContent = row.paused ? "paused" : "running";
  made.cells.limits.textContent = limitsText(limits);
  made.tr.classList.toggle("is-paused", !!row.paused);
}

export function overview(view, live) {
  const rows = new Map();
  let reload = 0;
  const queuesBody = h("div", {}, h("p", { class: "muted" }, "Loading queues…"));
  const charts = h("div", { class: "charts" });
  const totals = h("div", { class: "tiles" });
  const workers = h("div", {});
  const crons = h("div", {});
  const storage = h("div", {});
  clear(view);
  append(view, h("h1", {}, "Overview"), section("Queues", queuesBody),
    section("Throughput and latency", totals, charts),
    section("Workers", workers), section("Crons", crons),
    section("Storage", storage));

  async function loadQueues() {
    const started = performance.now();
    const [summary, dash] = await Promise.all([get("/queues/summary"), get("/dashboard/queues?limit=500")]);
    const dlq = new Map((dash.queues || []).map((r) => [r.name, r.dlq]));
    const limits = await Promise.all(summary.map((r) => get(`/queues/${q(r.name)}/limits`)));
    const names = summary.map((row) => row.name);
    if (names.length && names.length === rows.size && names.every((n) => rows.has(n))) {
      // The same queues: their cells change in place, so a row being clicked stays where it is.
      // A row that an event updated after this read began already shows newer counts than the read.
      summary.forEach((row, i) => {
        const made = rows.get(row.name);
        if (made.heard < started) fill(made, row, dlq.get(row.name), limitsOf(limits[i]));
        else made.cells.limits.textContent = limitsText(limitsOf(limits[i]));
      });
      return;
    }
    rows.clear();
    const trs = summary.map((row, i) => {
      const made = queueRow(row, dlq.get(row.name), limitsOf(limits[i]));
      rows.set(row.name, made);
      return made.tr;
    });
    clear(queuesBody);
    if (!trs.length) append(queuesBody, h("p", { class: "muted" }, "No queue yet."));
    else append(queuesBody, table(["Queue", ...COUNTS, "DLQ", "State", "Limits"], trs));
  }

  function drawCharts() {
    clear(charts);
    append(charts,
      lineChart("Throughput (jobs/s)", samples, [
        { key: "pushPerSec", label: "push", color: "#2563eb" },
        { key: "pullPerSec", label: "pull", color: "#9333ea" },
        { key: "completePerSec", label: "complete", color: "#16a34a" },
        { key: "failPerSec", label: "fail", color: "#dc2626" }], "/s"),
      lineChart("Latency (average ms)", samples, [
        { key: "pushMs", label: "push", color: "#2563eb" },
        { key: "pullMs", label: "pull", color: "#9333ea" },
        { key: "ackMs", label: "ack", color: "#16a34a" }], " ms"));
  }

  async function loadDashboard() {
    const [d, registry] = await Promise.all([get("/dashboard"), get("/workers")]);
    samples.push({ t: Date.now(), values: { ...(d.throughput || {}), ...((d.latency || {}).averages || {}) } });
    if (samples.length > SAMPLES_KEPT) samples.splice(0, samples.length - SAMPLES_KEPT);
    drawCharts();
    const s = d.stats || {};
    clear(totals);
    for (const [label, value] of [["pushed", s.totalPushed], ["completed", s.totalCompleted],
      ["failed", s.totalFailed], ["memory (MB)", (d.memory || {}).rss]]) {
      append(totals, h("div", { class: "tile" }, h("span", {}, label), h("strong", {}, value ?? 0)));
    }
    const list = (registry.data || {}).workers || [];
    clear(workers);
    append(workers, list.length ? table(["Worker", "Queues", "Status", "Concurrency", "Active", "Processed", "Failed", "Last seen"],
      list.map((w) => h("tr", { "data-worker": w.name || w.workerId }, h("td", {}, w.name || w.workerId),
        h("td", {}, (w.queues || []).join(", ")), h("td", {}, w.status ?? ""),
        h("td", { class: "num" }, w.concurrency ?? ""), h("td", { class: "num" }, w.activeJobs ?? 0),
        h("td", { class: "num" }, w.processedJobs ?? 0), h("td", { class: "num" }, w.failedJobs ?? 0),
        h("td", {}, ago(w.lastSeen)))))
      : h("p", { class: "muted" }, "No worker registered."));
    const cronList = (d.crons || {}).list || [];
    clear(crons);
    append(crons, cronList.length ? table(["Cron", "Queue", "Schedule", "Next run", "Runs"],
      cronList.map((c) => h("tr", { "data-cron": c.name }, h("td", {}, c.name), h("td", {}, link(`/ui/queues/${q(c.queue)}`, c.queue)),
        h("td", {}, c.schedule || (c.repeatEvery ? `every ${c.repeatEvery} ms` : "")),
        h("td", {}, when(c.nextRun)), h("td", { class: "num" }, c.executions ?? 0))))
      : h("p", { class: "muted" }, "No cron."));
    const st = d.storage || {};
    clear(storage);
    append(storage, h("p", { class: st.diskFull ? "error" : "ok", "data-field": "storage" },
      st.diskFull ? `Degraded: ${st.error || "disk full"} since ${when(st.since)}` : "Healthy"));
  }

  function onEvent(name, data) {
    if (name === "queue:counts") {
      const row = rows.get(data.queue);
      if (!row) {
        loadQueues().catch(live.failed);
        return;
      }
      for (const key of COUNTS) if (key in data) row.cells[key].textContent = String(data[key]);
      row.heard = performance.now();
    } else if (name === "queue:paused" || name === "queue:resumed") {
      const row = rows.get(data.queue);
      if (row) {
        row.cells.paused.textContent = name === "queue:paused" ? "paused" : "running";
        row.tr.classList.toggle("is-paused", name === "queue:paused");
        row.heard = performance.now();
      }
    } else if (name === "stats:snapshot") {
      for (const [queue, counts] of Object.entries(data.queues || {})) {
        const row = rows.get(queue);
        if (row) row.cells.dlq.textContent = String(counts.dlq ?? 0);
      }
    } else if (RELOAD_ON.has(name) || name === STREAM_OPEN) {
      clearTimeout(reload);
      reload = setTimeout(() => loadQueues().catch(live.failed), 100);
    }
  }

  live.listen(onEvent);
  loadQueues().catch(live.failed);
  loadDashboard().catch(live.failed);
  const timer = setInterval(() => loadDashboard().catch(live.failed), SAMPLE_MS);
  return () => {
    clearInterval(timer);
    clearTimeout(reload);
  };
}
