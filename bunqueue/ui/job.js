// `/ui/jobs/<id>`: everything the broker keeps of one job, and the actions that apply to it.

import { act, get, q, STREAM_OPEN } from "./api.js";
import { append, clear, confirmAction, h, link, notice, pretty, section, table, when } from "./dom.js";

function field(label, value) {
  return h("div", {}, h("dt", {}, label), h("dd", {}, value));
}

const OPTIONS = ["priority", "maxAttempts", "backoff", "timeout", "ttl", "delay", "lifo", "removeOnComplete",
  "removeOnFail", "uniqueKey", "customId", "groupId", "tags", "repeat", "durable", "stallTimeout",
  "stackTraceLimit", "keepLogs", "failParentOnFailure", "dependsOn"];

// A child's result among its parent's children values, which are keyed "<queue>:<id>".
function childValue(children, id) {
  const values = children && children.data && children.data.values;
  if (!values) return undefined;
  const found = Object.entries(values).find(([key]) => key === id || key.endsWith(`:${id}`));
  return found ? found[1] : undefined;
}

// Everything shown of a job, given its logs, its children's results and its DLQ page (when it failed).
function details(job, logs, children, dlq, actions) {
  const entry = dlq ? (dlq.entries || []).find((e) => e.job && e.job.id === job.id) : null;
  const options = {};
  for (const name of OPTIONS) if (job[name] !== undefined && job[name] !== null) options[name] = job[name];
  const stack = Array.isArray(job.stacktrace) ? job.stacktrace.join("\n") : job.stacktrace;

  return [
    h("dl", { class: "facts" },
      field("Name", job.name ?? ""), field("Queue", link(`/ui/queues/${q(job.queue)}`, job.queue)),
      field("State", h("span", { class: `state state-${job.state}`, "data-field": "state" }, job.state)),
      field("Attempts", `${job.attempts ?? 0} of ${job.maxAttempts ?? "?"}`),
      field("Progress", h("span", {}, h("progress", { max: 100, value: Number(job.progress) || 0 }),
        ` ${Number(job.progress) || 0}%${job.progressMessage ? ` ${job.progressMessage}` : ""}`)),
      field("Created", when(job.createdAt)), field("Runs at", when(job.runAt)),
      field("Started", when(job.startedAt)), field("Finished", when(job.completedAt)),
      field("Parent", job.parentId ? link(`/ui/jobs/${q(job.parentId)}`, h("code", {}, job.parentId)) : "—")),
    section("Actions", actions),
    section("Data", h("pre", { "data-field": "data" }, pretty(job.data))),
    job.returnvalue !== undefined ? section("Result", h("pre", { "data-field": "result" }, pretty(job.returnvalue))) : null,
    job.failedReason || entry ? section("Failure",
      h("p", { class: "error", "data-field": "failure" }, job.failedReason || (entry && entry.error) || ""),
      entry ? h("p", { class: "muted" }, `Dead-lettered ${when(entry.enteredAt)}: ${entry.reason}`) : null,
      stack ? h("pre", { "data-field": "stack" }, stack) : null,
      entry && entry.attempts && entry.attempts.length ? table(["Attempt", "Started", "Failed", "Reason", "Error", "ms"],
        entry.attempts.map((a) => h("tr", {}, h("td", { class: "num" }, a.attempt), h("td", {}, when(a.startedAt)),
          h("td", {}, when(a.failedAt)), h("td", {}, a.reason ?? ""), h("td", {}, a.error ?? ""),
          h("td", { class: "num" }, a.duration ?? "")))) : null) : null,
    section("Timeline", table(["When", "State", "Detail"], (job.timeline || []).map((t) => h("tr", {},
      h("td", {}, when(t.timestamp)), h("td", {}, t.state), h("td", {}, t.error ?? ""))))),
    section("Options", h("pre", {}, pretty(options))),
    section("Logs", ((logs.data || {}).logs || []).length
      ? h("ol", { class: "logs" }, logs.data.logs.map((l) => h("li", {}, h("time", {}, when(l.timestamp)), " ",
        l.level ? `[${l.level}] ` : "", l.message ?? "")))
      : h("p", { class: "muted" }, "No log line.")),
    (job.childrenIds || []).length ? section("Children", h("ul", {}, job.childrenIds.map((c) => {
      const value = childValue(children, c);
      return h("li", { "data-child": c }, link(`/ui/jobs/${q(c)}`, h("code", {}, c)),
        value === undefined ? "" : ` → ${JSON.stringify(value)}`);
    }))) : null];
}

export function jobView(view, live, params, navigate) {
  const id = params[0];
  const status = h("p", { class: "notice", role: "status" });
  const body = h("div", {}, h("p", { class: "muted" }, "Loading job…"));
  clear(view);
  append(view, h("p", { class: "crumbs" }, link("/ui/", "Queues"), " / "), h("h1", {}, "Job ", h("code", {}, id)),
    status, body);

  async function run(label, method, path, payload, question) {
    if (question && !(await confirmAction(question))) return;
    busy = true;
    try {
      await act(method, path, payload);
      notice(status, `${label}: done`, "ok");
      if (method === "DELETE") removed();
      else await load();
    } catch (err) {
      notice(status, `${label}: ${err.message}`, "error");
      live.failed(err);
    } finally {
      busy = false;
    }
  }

  function actions(job) {
    const priority = h("input", { type: "number", id: "priority", value: job.priority ?? 0 });
    const queue = q(job.queue);
    const retry = job.state === "failed"
      ? () => run("Retry", "POST", `/queues/${queue}/dlq/retry`, { jobId: job.id })
      : () => run("Retry", "POST", `/queues/${queue}/retry-completed`, { id: job.id });
    return h("div", { class: "controls" },
      h("div", { class: "row" },
        h("button", { type: "button", disabled: job.state !== "delayed",
          onclick: () => run("Promote", "POST", `/jobs/${q(job.id)}/promote`) }, "Promote"),
        h("button", { type: "button", disabled: !["failed", "completed"].includes(job.state), onclick: retry }, "Retry"),
        h("button", { type: "button", class: "danger", onclick: () => run("Cancel", "DELETE", `/jobs/${q(job.id)}`,
          undefined, `Cancel job ${job.id}? It is removed from the queue.`) }, "Cancel"),
        h("button", { type: "button", class: "danger", disabled: job.state !== "active",
          onclick: () => run("Discard", "POST", `/jobs/${q(job.id)}/discard`, undefined,
            `Discard job ${job.id}? It fails without another attempt.`) }, "Discard")),
      h("form", { class: "row", onsubmit: (e) => {
        e.preventDefault();
        run("Priority", "PUT", `/jobs/${q(job.id)}/priority`, { priority: Number(priority.value) });
      } }, h("label", { for: "priority" }, "Priority"), priority, h("button", { type: "submit" }, "Change")));
  }

  // A removed job is not asked for again: the broker would only answer 404.
  let gone = false;
  // While an action runs, event refreshes wait for it (it reloads the job itself).
  let busy = false;
  function removed() {
    gone = true;
    clearTimeout(refresh);
    clear(body);
    append(body, h("p", { class: "muted", "data-field": "removed" }, "This job was removed."), link("/ui/", "All queues"));
  }

  // Loads may overlap (an event, an action); only the latest one draws.
  let latest = 0;

  // An event's refresh started before the operator took a field must not draw over what they typed.
  const editing = () => body.contains(document.activeElement) && document.activeElement.matches("input, select");

  async function load(fromEvent = false) {
    if (gone) return;
    const mine = ++latest;
    const reply = await get(`/jobs/${q(id)}`);
    if (gone || mine !== latest) return;
    if (!reply.ok) {
      clear(body);
      append(body, h("p", { class: "error" }, reply.error || "Job not found"));
      return;
    }
    const job = reply.job;
    const [logs, children, dlq] = await Promise.all([
      get(`/jobs/${q(id)}/logs`),
      (job.childrenIds || []).length ? get(`/jobs/${q(id)}/children`) : null,
      job.state === "failed" ? get(`/queues/${q(job.queue)}/dlq`) : null]);
    if (gone || mine !== latest) return;
    if (fromEvent && (busy || editing())) {
      refreshSoon(1000);
      return;
    }
    clear(body);
    append(body, ...details(job, logs, children, dlq, actions(job)));
  }

  let refresh = 0;
  // Events about this job show its new state, but not under the operator's hands: while a field of the
  // page has the focus or an action runs, the refresh waits.
  const refreshSoon = (ms) => {
    clearTimeout(refresh);
    refresh = setTimeout(() => {
      if (busy || editing()) refreshSoon(1000);
      else load(true).catch(live.failed);
    }, ms);
  };
  live.listen((event, data) => {
    if (event === STREAM_OPEN) refreshSoon(0);
    if (!data || data.jobId !== id || gone) return;
    if (event === "job:removed") removed();
    else refreshSoon(100);
  });
  load().catch(live.failed);
  return () => clearTimeout(refresh);
}
