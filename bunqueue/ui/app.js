// The dashboard's router: the path picks a view, links and back/forward change it without a reload
// (History API), one event stream feeds whichever view is shown.

import { get, needToken, openStream, setToken, STREAM_OPEN, token, Unauthorized } from "./api.js";
import { append, clear, h, link } from "./dom.js";
import { jobView } from "./job.js";
import { overview } from "./overview.js";
import { queueView } from "./queue.js";

const ROUTES = [
  [/^\/ui\/?$/, overview],
  [/^\/ui\/queues\/([^/]+)\/?$/, queueView],
  [/^\/ui\/jobs\/([^/]+)\/?$/, jobView],
];

const view = document.getElementById("view");
const login = document.getElementById("login");
const liveBadge = document.getElementById("live");
const forget = document.getElementById("forget");
let auth = false;
let dispose = null;
let stopStream = null;
let listener = null;

const live = {
  listen(fn) {
    listener = fn;
  },
  failed(err) {
    // A refusal that comes while the prompt is up (a request of a view the prompt closed) changes nothing.
    if (err instanceof Unauthorized && login.hidden) askToken("The token was refused.");
  },
};

function showLive(state) {
  if (state === "unauthorized") {
    askToken("The token was refused.");
    return;
  }
  liveBadge.textContent = state;
  liveBadge.dataset.state = state;
  // What changed before the stream (re)connected was not heard: the view reads its data again.
  if (state === "live" && listener) listener(STREAM_OPEN, {});
}

function askToken(message) {
  setToken("");
  if (stopStream) stopStream();
  stopStream = null;
  if (dispose) dispose();
  dispose = null;
  clear(view);
  view.hidden = true;
  forget.hidden = true;
  login.hidden = false;
  showLive("offline");
  document.getElementById("token-error").textContent = message || "";
  document.getElementById("token").focus();
}

function render() {
  if (dispose) dispose();
  dispose = null;
  listener = null;
  const path = location.pathname;
  for (const [pattern, show] of ROUTES) {
    const found = pattern.exec(path);
    if (found) {
      let params;
      try {
        params = found.slice(1).map(decodeURIComponent);
      } catch {
        break;
      }
      dispose = show(view, live, params, navigate) || null;
      view.focus({ preventScroll: true });
      document.title = `${params[0] || "Queues"} · bunqueue`;
      return;
    }
  }
  clear(view);
  append(view, h("h1", {}, "Not found"), h("p", {}, "Nothing is shown at this address. ", link("/ui/", "All queues")));
}

export function navigate(path) {
  history.pushState(null, "", path);
  render();
  window.scrollTo(0, 0);
}

function start() {
  login.hidden = true;
  view.hidden = false;
  forget.hidden = !auth;
  stopStream = openStream((name, data) => listener && listener(name, data), showLive);
  render();
}

document.addEventListener("click", (event) => {
  const a = event.target.closest("a");
  if (!a || a.target || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui/")) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});

window.addEventListener("popstate", () => {
  if (!login.hidden) return;
  render();
});

document.getElementById("token-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  setToken(input.value);
  input.value = "";
  try {
    await get("/ping");
  } catch (err) {
    askToken(err instanceof Unauthorized ? "The token was refused." : String(err.message));
    return;
  }
  start();
});

forget.addEventListener("click", () => askToken(""));

(async () => {
  const config = await (await fetch("/ui/static/config.json")).json();
  auth = !!config.auth;
  needToken(auth);
  if (auth && !token()) askToken("");
  else start();
})();
