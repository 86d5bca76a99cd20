// The raftrain dashboard: polls /api/v1/view every second and redraws the page from it.
// Every text from the view goes in through textContent or an SVG attribute, never as HTML,
// so a trainer name or a failure reason cannot become markup or script.
"use strict";

const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
const CHART = { width: 420, height: 160, margin: 28 };

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
  return node;
}

function show(value) {
  return value === null || value === undefined ? "–" : String(value);
}

function fixed(value) {
  return value === null || value === undefined ? null : value.toFixed(4);
}

function time(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : "–";
}

function table(headings, rows) {
  const result = el("table");
  const head = result.appendChild(el("thead")).appendChild(el("tr"));
  for (const heading of headings) head.appendChild(el("th", null, heading));
  const body = result.appendChild(el("tbody"));
  for (const row of rows) {
    const line = body.appendChild(el("tr"));
    for (const cell of row) line.appendChild(el("td", null, show(cell)));
  }
  return result;
}

function renderServedBy(view) {
  const servedBy = document.getElementById("served-by");
  const self = view.served_by;
  const roles = { leader: "leader", follower: "follower", no_leader: "knows no leader" };
  let text = `master ${self.id}: ${roles[self.role] || self.role}`;
  servedBy.className = self.role === "leader" ? "leader" : "follower";
  if (self.role === "follower") text += `, showing the view of leader ${self.leader}`;
  if (!view.leader_reachable) {
    text += ` — cannot reach a leader: ${show(view.leader_error)}`;
    servedBy.className = "unreachable";
  }
  servedBy.textContent = text;
}

function renderGroup(group) {
  const leader = document.getElementById("leader");
  leader.textContent = group.leader === null
    ? "no leader known"
    : `leader: master ${group.leader}, term ${group.term}, since ${time(group.leader_since_ms)}`;
  const body = document.querySelector("#members tbody");
  body.replaceChildren();
  for (const member of group.members) {
    const row = body.appendChild(el("tr"));
    const state = member.reachable ? member.role : `unreachable (${member.error})`;
    for (const cell of [member.id, member.addr, state, member.term, member.last_log_index, member.last_applied_index]) {
      row.appendChild(el("td", null, show(cell)));
    }
  }
}

function progressBar(job) {
  const total = Math.max(1, job.todo + job.pending + job.done + job.failed);
  const bar = el("div", "bar");
  const legend = el("div", "legend");
  for (const queue of ["todo", "pending", "done", "failed"]) {
    const part = bar.appendChild(el("span", queue));
    part.style.width = `${(100 * job[queue]) / total}%`;
    legend.appendChild(el("span", queue + "-label", `${queue}: ${job[queue]}`));
  }
  return [bar, legend];
}

// A line chart of `series` ([{points: [[x, y]], className, pointClass}]) with y in [0, yMax].
function chart(title, series, yMax, className) {
  const { width, height, margin } = CHART;
  const root = svg("svg", { width, height, class: className, viewBox: `0 0 ${width} ${height}` });
  const heading = root.appendChild(svg("text", { x: margin, y: 12 }));
  heading.textContent = title;
  root.appendChild(svg("line", { class: "axis", x1: margin, y1: height - margin, x2: width - 4, y2: height - margin }));
  root.appendChild(svg("line", { class: "axis", x1: margin, y1: 18, x2: margin, y2: height - margin }));
  const xs = series.flatMap((line) => line.points.map((point) => point[0]));
  const [xMin, xMax] = [Math.min(...xs), Math.max(...xs)];
  const x = (value) => margin + ((value - xMin) / Math.max(1e-9, xMax - xMin)) * (width - margin - 8);
  const y = (value) => height - margin - (value / Math.max(1e-9, yMax)) * (height - margin - 22);
  const top = root.appendChild(svg("text", { x: 2, y: 24 }));
  top.textContent = yMax.toPrecision(2);
  for (const line of series) {
    if (line.points.length === 0) continue;
    const coordinates = line.points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`);
    root.appendChild(svg("polyline", { class: line.className, points: coordinates.join(" ") }));
    if (!line.pointClass) continue;
    for (const [px, py] of line.points) {
      root.appendChild(svg("circle", { class: line.pointClass, cx: x(px), cy: y(py), r: 3, "data-x": px }));
    }
  }
  return root;
}

function charts(job) {
  const rates = job.rates.map(([at, rate]) => [at, rate]);
  const rateMax = Math.max(1, ...rates.map((point) => point[1]));
  const accuracy = job.evals.filter((e) => e.accuracy !== null).map((e) => [e.pass, e.accuracy]);
  const losses = job.evals.filter((e) => e.loss !== null).map((e) => [e.pass, e.loss]);
  const lossMax = Math.max(1, ...losses.map((point) => point[1]));
  const scaledLoss = losses.map(([pass, loss]) => [pass, loss / lossMax]);
  const box = el("div", "charts");
  box.appendChild(chart("tasks per second", [{ points: rates, className: "rate-line" }], rateMax, "rate-chart"));
  box.appendChild(chart(`accuracy (green) and loss / ${lossMax.toPrecision(3)} (red) per pass`, [
    { points: accuracy, className: "accuracy-line", pointClass: "accuracy-point" },
    { points: scaledLoss, className: "loss-line", pointClass: "loss-point" },
  ], 1, "eval-chart"));
  return box;
}

function renderJob(job) {
  const box = el("section", "job");
  box.dataset.job = job.name;
  box.appendChild(el("h2", "job-name", `job ${job.name}`));
  const summary = `${job.state}, pass ${job.pass + 1} of ${job.passes}, ${job.tasks} tasks a pass, ` +
    `dataset ${show(job.dataset_kind)}, ${job.dispatched} dispatched`;
  box.appendChild(el("p", "job-summary", summary));
  box.append(...progressBar(job));
  box.appendChild(charts(job));
  const evals = job.evals.map((e) => [e.pass, fixed(e.loss), fixed(e.accuracy)]);
  box.appendChild(el("h3", null, "Evaluations"));
  box.appendChild(table(["pass", "loss", "accuracy"], evals));
  box.appendChild(el("h3", null, `Trainers (${job.trainers.length} of ${job.trainers_total})`));
  box.appendChild(table(["id", "name", "last heartbeat (ms ago)", "tasks done", "tasks/s"],
    job.trainers.map((t) => [t.id, t.name, t.last_heartbeat_ms_ago, t.tasks_done, t.tasks_per_second])));
  box.appendChild(el("h3", null, `Pservers (${job.pservers.length} of ${job.pservers_desired} slots held)`));
  box.appendChild(table(["slot", "address", "generation", "checkpoint step", "checkpoint at"],
    job.pservers.map((p) => [p.index, p.addr, p.generation, p.checkpoint_step, time(p.checkpoint_created_ms)])));
  box.appendChild(el("h3", null, `Failed tasks (${job.failed_tasks.length} of ${job.failed_tasks_total})`));
  box.appendChild(table(["task", "reason"], job.failed_tasks.map((f) => [f.task, f.reason])));
  return box;
}

function renderTimeline(timeline) {
  const list = document.getElementById("timeline");
  list.replaceChildren();
  for (const entry of timeline.slice().reverse()) {
    const text = entry.kind === "leader"
      ? (entry.leader === null ? `no leader in term ${entry.term}` : `master ${entry.leader} leads in term ${entry.term}`)
      : `job ${entry.job}: slot ${entry.slot} from generation ${show(entry.from_generation)} to ${entry.to_generation}`;
    list.appendChild(el("li", `event-${entry.kind}`, `${time(entry.at_ms)} ${text}`));
  }
}

function renderRendezvous(rendezvous) {
  const note = document.getElementById("rendezvous-note");
  note.textContent = rendezvous.error !== null
    ? `the leader did not list them: ${rendezvous.error}`
    : `${rendezvous.runs.length} run(s)`;
  document.getElementById("rendezvous").replaceChildren(table(
    ["run", "round", "participants", "waiting", "keys", "bytes", "last written (s ago)"],
    rendezvous.runs.map((r) => [r.run, r.round, r.participants, r.waiting, r.keys, r.bytes,
      (r.idle_ms / 1000).toFixed(1)])));
}

function render(view) {
  renderServedBy(view);
  renderGroup(view.group);
  document.getElementById("jobs").replaceChildren(...view.jobs.map(renderJob));
  renderRendezvous(view.rendezvous);
  renderTimeline(view.timeline);
  const updated = document.getElementById("updated");
  updated.className = "";
  updated.textContent = `updated ${time(view.now_ms)}`;
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
}

async function poll() {
  let view;
  try {
    const response = await fetch("/api/v1/view", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    view = await response.json();
  } catch (error) {
    // This master is away: say so on the page and ask again at the next poll. A failure to
    // render, below, is a bug and stays uncaught, so the browser reports it.
    const updated = document.getElementById("updated");
    updated.className = "warning";
    updated.textContent = `this master did not answer: ${error.message}`;
    return;
  }
  render(view);
}

// Errors the page met, counted where a test (or a curious operator) can read them.
let pageErrors = 0;
function countError() {
  pageErrors += 1;
  document.body.dataset.errors = String(pageErrors);
}
window.addEventListener("error", countError);
window.addEventListener("unhandledrejection", countError);

poll();
setInterval(poll, POLL_MS);
