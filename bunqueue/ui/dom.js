// Every element is built here. Text goes in through text nodes only, never as markup, so that job data,
// names and errors holding HTML are shown as the characters they are.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, ...children);
  return el;
}

export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function link(path, ...children) {
  return h("a", { href: path }, ...children);
}

export function pretty(value) {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export function when(ms) {
  if (typeof ms !== "number" || !ms) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function ago(ms) {
  if (typeof ms !== "number" || !ms) return "—";
  const s = Math.round((Date.now() - ms) / 1000);
  if (Math.abs(s) < 60) return s >= 0 ? `${s}s ago` : `in ${-s}s`;
  const m = Math.round(s / 60);
  if (Math.abs(m) < 60) return m >= 0 ? `${m}m ago` : `in ${-m}m`;
  const hours = Math.round(m / 60);
  return hours >= 0 ? `${hours}h ago` : `in ${-hours}h`;
}

export function table(headers, rows, caption) {
  return h("div", { class: "scroll" },
    h("table", {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((name) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows)));
}

export function section(title, ...children) {
  return h("section", { class: "panel", "aria-label": title }, h("h2", {}, title), ...children);
}

// A modal confirmation for destructive actions; resolves to whether the operator confirmed.
export function confirmAction(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    document.getElementById("confirm-ok").focus();
  });
}

export function notice(el, text, kind) {
  el.textContent = text;
  el.className = `notice ${kind || ""}`;
}
