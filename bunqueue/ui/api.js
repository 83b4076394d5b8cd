// Every request to the broker: the tab's token (sessionStorage) goes with each one, including the event
// stream, which is read through fetch because EventSource cannot send an Authorization header.

const KEY = "bunqueue.token";

export class Unauthorized extends Error {}

export class Refused extends Error {}

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

// Set when the broker asks for a token: a request without one is refused here, not sent (a view's request
// that outlives a forgotten token would only fetch a 401).
let tokenNeeded = false;

export function needToken(needed) {
  tokenNeeded = needed;
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

function headers(json) {
  const out = {};
  if (json) out["Content-Type"] = "application/json";
  const t = token();
  if (t) out.Authorization = `Bearer ${t}`;
  return out;
}

export async function request(method, path, body) {
  if (tokenNeeded && !token()) throw new Unauthorized("Unauthorized");
  const init = { method, headers: headers(body !== undefined) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const resp = await fetch(path, init);
  if (resp.status === 401) throw new Unauthorized("Unauthorized");
  return resp.json();
}

export const get = (path) => request("GET", path);

// A change: its reply, or Refused with the broker's error text.
export async function act(method, path, body) {
  const reply = await request(method, path, body);
  if (reply && reply.ok === false) throw new Refused(reply.error || "refused");
  return reply;
}

export const q = (name) => encodeURIComponent(name);

// The event a view's listener gets when the stream (re)connects.
export const STREAM_OPEN = "stream:open";

// The server's event stream, parsed as Server-Sent Events; reconnects after a drop. onEvent(name, data).
export function openStream(onEvent, onState) {
  let stopped = false;
  let controller = null;
  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      try {
        const resp = await fetch("/events", { headers: headers(false), signal: controller.signal });
        if (resp.status === 401) {
          onState("unauthorized");
          return;
        }
        if (!resp.ok || !resp.body) throw new Error(`stream ${resp.status}`);
        onState("live");
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, end), onEvent);
            buffer = buffer.slice(end + 2);
          }
        }
      } catch {
        if (stopped) return;
      }
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
  };
  run();
  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return;
  try {
    onEvent(name, JSON.parse(data.join("\n")));
  } catch {
    // A message that is not JSON carries nothing the views read.
  }
}
