// The voxwire web app: upload a file, record live, search. Plain modules on
// top of the browser SDK (./sdk/) and mqtt.js (./vendor/), no framework.

import { fillPickers, sessionOptions } from "./options.js";
import { VoxwireClient } from "./sdk/index.js";

const KEY_STORAGE = "voxwire.apiKey";
const $ = (/** @type {string} */ selector) => /** @type {any} */ (document.querySelector(selector));

/** @type {VoxwireClient | null} */
let client = null;

// -- small helpers ---------------------------------------------------------

/** m:ss.s @param {number} ms */
function clock(ms) {
  const minutes = Math.floor(ms / 60000);
  return `${minutes}:${((ms % 60000) / 1000).toFixed(1).padStart(4, "0")}`;
}

/** Show an error (with what to do next) or a note above the tabs. */
function notify(/** @type {any} */ error, kind = "error") {
  const notice = $("#notice");
  notice.textContent = typeof error === "string" ? error : `${error.message}${error.hint ? ` — ${error.hint}` : ""}`;
  notice.dataset.kind = kind;
  notice.hidden = false;
  if (kind === "error") console.error(error);
}

function clearNotice() {
  $("#notice").hidden = true;
}

/**
 * The server's highlight (HTML-escaped text with <em>) as DOM nodes, keeping
 * only text and <em>: nothing in a transcript can become markup.
 * @param {string} html
 */
function highlighted(html) {
  const body = new DOMParser().parseFromString(`<body>${html}</body>`, "text/html").body;
  const out = document.createDocumentFragment();
  for (const node of body.childNodes) {
    if (node.nodeName === "EM") {
      const em = document.createElement("em");
      em.textContent = node.textContent;
      out.append(em);
    } else {
      out.append(document.createTextNode(node.textContent ?? ""));
    }
  }
  return out;
}

/** One phrase per line. @param {string} text */
function phrases(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean);
}

/**
 * A prompt from a line of the text box: "S2: phrase" listens to speaker S2 only,
 * "customer: cancel" to the channel labelled customer.
 * @param {string} line @param {string} id
 */
function promptOf(line, id) {
  const limited = /^([A-Za-z][A-Za-z0-9_-]{0,23})\s*:\s*(.+)$/.exec(line);
  if (!limited) return { id, text: line };
  const speaker = /^S[0-9]+$/i.test(limited[1]) ? limited[1].toUpperCase() : limited[1];
  return { id, text: limited[2], speaker };
}

// -- speakers: a colour per label, always with the label as text -------------

/** Distinct on white and for the common colour-vision deficiencies; S1 is the first. */
const SPEAKER_COLOURS = ["#2b59c3", "#c2410c", "#0f766e", "#9333ea", "#b91c1c", "#4d7c0f", "#a16207", "#475569"];

/** Channel labels of calls, in the colours of the first speakers. */
const CHANNEL_COLOURS = { agent: SPEAKER_COLOURS[0], customer: SPEAKER_COLOURS[1] };

/**
 * The same colour for a label everywhere: S1, S2... in order (S9 wraps round to S1's);
 * agent and customer as S1 and S2; any other channel label (ch1, supervisor) by its letters.
 * @param {string} label
 */
function speakerColour(label) {
  const known = CHANNEL_COLOURS[label.toLowerCase()];
  if (known) return known;
  const n = Number(/^(?:S|ch)([0-9]+)$/i.exec(label)?.[1] ?? 0);
  if (n > 0) return SPEAKER_COLOURS[(n - 1) % SPEAKER_COLOURS.length];
  let hash = 0;
  for (const c of label) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  return label ? SPEAKER_COLOURS[hash % SPEAKER_COLOURS.length] : "var(--muted)";
}

/** A badge with the speaker's label in the speaker's colour. @param {string} label */
function speakerBadge(label) {
  const badge = document.createElement("span");
  badge.className = "speaker";
  badge.textContent = label;
  badge.title = `speaker ${label}`;
  badge.style.setProperty("--speaker", speakerColour(label));
  return badge;
}

// -- a session on screen: progress, player, match cards, segments ---------

class SessionView {
  /** @param {HTMLElement} container */
  constructor(container) {
    const node = /** @type {HTMLTemplateElement} */ ($("#session-template")).content.firstElementChild.cloneNode(true);
    container.replaceChildren(node);
    this.root = /** @type {HTMLElement} */ (node);
    this.progress = this.root.querySelector("progress");
    this.statusText = this.root.querySelector(".status");
    this.player = /** @type {HTMLAudioElement} */ (this.root.querySelector("audio"));
    this.matchList = this.root.querySelector(".matches");
    this.segmentList = this.root.querySelector(".segments");
    this.downloads = this.root.querySelector(".downloads");
    this.heardText = this.root.querySelector(".heard");
    for (const link of this.downloads.querySelectorAll("a")) {
      link.addEventListener("click", (/** @type {MouseEvent} */ event) => this.download(event, link));
    }
    this.root.querySelector(".delete").addEventListener("click", () => this.erase());
    this.finals = 0;
    this.reconnectingText = "reconnecting…";
    this.beforeReconnect = "";
  }

  /** Offer the stored transcript as text and subtitles. @param {string} sid */
  offerDownloads(sid) {
    this.root.dataset.sid = sid;
    this.downloads.hidden = false;
  }

  /**
   * Delete the session everywhere (audio, transcripts, search entries, messages),
   * once the user confirms; the view then says so and offers nothing more.
   */
  async erase() {
    const sid = this.root.dataset.sid;
    if (!client || !sid) return;
    if (!window.confirm("Delete this session's audio, transcripts and search entries? This cannot be undone.")) return;
    try {
      await client.deleteSession(sid);
    } catch (error) {
      notify(error);
      return;
    }
    this.root.dataset.deleted = "true";
    this.downloads.hidden = true;
    this.player.removeAttribute("src");
    this.player.hidden = true;
    this.segmentList.replaceChildren();
    this.matchList.replaceChildren();
    this.status("deleted");
  }

  /**
   * Fetch the transcript in the link's format (the API key goes in a header,
   * so a plain link cannot) and save it as a file.
   * @param {MouseEvent} event @param {HTMLAnchorElement} link
   */
  async download(event, link) {
    if (link.dataset.ready) return; // the file is in place: let the browser save it
    event.preventDefault();
    const sid = this.root.dataset.sid;
    if (!client || !sid) return;
    try {
      const format = /** @type {"txt" | "srt" | "vtt"} */ (link.dataset.format);
      const text = await client.transcriptAs(sid, format);
      link.href = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
      link.download = `${sid}.${format}`;
      link.dataset.ready = "true";
      link.click();
    } catch (error) {
      notify(error);
    }
  }

  /**
   * Which model transcribed the session and in which language (with how sure
   * the detection was), as the segments and the transcript say; and which
   * version of the transcript it is, once it has been transcribed again.
   * @param {{model?: string | null, language?: string | null, language_prob?: number | null}} said
   * @param {number} [version]
   */
  heard(said, version) {
    const language = said.language && (said.language_prob != null ? `${said.language} ${Math.round(said.language_prob * 100)}%` : said.language);
    const text = [said.model, language, version && version > 1 ? `version ${version}` : ""].filter(Boolean).join(" · ");
    if (!text) return;
    this.heardText.textContent = text;
    this.heardText.hidden = false;
  }

  /** @param {string} text */
  status(text) {
    this.statusText.textContent = text;
  }

  /** @param {string} url */
  setAudio(url) {
    this.player.src = url;
    this.player.hidden = false;
  }

  /** Handlers for a feed, attached before it connects. */
  listeners() {
    return {
      progress: (/** @type {any} */ m) => {
        this.progress.value = m.percent;
        this.status(m.status === "transcribing" ? `transcribing… ${Math.round(m.percent)}%` : m.status);
      },
      partial: (/** @type {any} */ m) => this.segment(m.segment, true, m.seq),
      final: (/** @type {any} */ m) => {
        this.finals += 1;
        this.segment(m.segment, false, m.seq);
        this.heard(m.segment, m.version);
      },
      match: (/** @type {any} */ m) => this.match(m),
      error: (/** @type {any} */ e) => {
        if (e.fatal) this.status(`failed: ${e.message}`);
        notify(e);
      },
      state: (/** @type {string} */ s) => {
        if (s === "reconnecting" && this.root.dataset.connection !== "reconnecting") {
          this.beforeReconnect = this.statusText.textContent;
          this.status(this.reconnectingText);
        } else if (s === "live" && this.statusText.textContent === this.reconnectingText) {
          this.status(this.beforeReconnect);
        }
        this.root.dataset.connection = s;
      },
      end: (/** @type {any} */ t) => {
        this.progress.value = 100;
        this.status(t.status === "completed" ? `done — ${t.segments.length} segments` : "failed");
        this.root.dataset.done = t.status;
        this.heard(t, t.version);
        if (t.status === "completed" && this.root.dataset.sid) this.offerDownloads(this.root.dataset.sid);
      },
    };
  }

  /**
   * Show a segment in index order; a final replaces the partial of its index.
   * A diarized segment shows its speaker's label, in the speaker's colour; a
   * translated one says from which language ("de → en"). A final that
   * `continues` the one before (the speaker went on after an early final) is
   * shown as the rest of that line: no time of its own, no rule between.
   * The row keeps the `seq` of the message that last set it.
   * @param {{index: number, start_ms: number, end_ms: number, text: string, speaker?: string | null,
   *   task?: string, language?: string | null, continues?: boolean}} segment
   * @param {boolean} partial
   * @param {number} [seq]
   */
  segment(segment, partial, seq) {
    let row = this.segmentList.querySelector(`li[data-index="${segment.index}"]`);
    if (!row) {
      row = document.createElement("li");
      row.dataset.index = String(segment.index);
      row.innerHTML = '<span class="time"></span><span class="text"></span>';
      const after = [...this.segmentList.children].find((li) => Number(li.dataset.index) > segment.index);
      this.segmentList.insertBefore(row, after ?? null);
    }
    if (!partial) row.dataset.final = "true";
    else if (row.dataset.final) return; // a late partial never undoes a final
    row.classList.toggle("partial", partial);
    if (segment.continues) row.dataset.continues = "true";
    if (seq !== undefined) row.dataset.seq = String(seq);
    row.dataset.startMs = String(segment.start_ms);
    row.dataset.endMs = String(segment.end_ms);
    row.querySelector(".time").textContent = clock(segment.start_ms);
    row.querySelector(".text").textContent = partial ? `${segment.text} …` : segment.text;
    row.querySelector(".speaker")?.remove();
    row.querySelector(".translated")?.remove();
    if (segment.task === "translate") {
      row.dataset.task = "translate";
      const from = document.createElement("span");
      from.className = "translated";
      from.textContent = `${segment.language ?? "?"} → en`;
      from.title = `translated into English from ${segment.language ?? "the language spoken"}`;
      row.querySelector(".text").before(from);
    }
    if (segment.speaker) {
      row.dataset.speaker = segment.speaker;
      row.style.setProperty("--speaker", speakerColour(segment.speaker));
      row.querySelector(".text").before(speakerBadge(segment.speaker));
    }
  }

  /** A card that seeks the player to the matched span. @param {any} m */
  match(m) {
    const card = document.createElement("button");
    card.type = "button";
    card.className = "match-card";
    card.dataset.startMs = String(m.start_ms);
    card.dataset.endMs = String(m.end_ms);
    card.innerHTML = '<span class="prompt"></span><span class="when"></span><span class="said"></span>';
    card.querySelector(".prompt").textContent = `“${m.prompt}”`;
    if (m.speaker) card.prepend(speakerBadge(m.speaker));
    card.querySelector(".when").textContent = `${clock(m.start_ms)}–${clock(m.end_ms)} · ${Math.round(m.score * 100)}%`;
    card.querySelector(".said").append(highlighted(m.highlight || m.text));
    card.addEventListener("click", () => this.seek(m.start_ms, m.end_ms));
    this.matchList.append(card);
  }

  /** Play from `startMs` and mark the segments of the span. @param {number} startMs @param {number} endMs */
  async seek(startMs, endMs) {
    for (const row of this.segmentList.children) {
      const inside = Number(row.dataset.startMs) < endMs && Number(row.dataset.endMs) > startMs;
      row.classList.toggle("in-match", inside);
    }
    if (this.player.hidden) return;
    if (this.player.readyState < HTMLMediaElement.HAVE_METADATA) {
      await new Promise((resolve) => this.player.addEventListener("loadedmetadata", resolve, { once: true }));
    }
    this.player.currentTime = startMs / 1000;
    this.player.play().catch(() => {}); // no audio output is fine: the position is set
  }
}

// -- sign in ---------------------------------------------------------------

async function signIn(/** @type {string} */ apiKey) {
  const candidate = new VoxwireClient({ apiKey });
  await candidate.gateway.listSessions(1); // 401 for a wrong key
  fillPickers((await candidate.gateway.health()).models);
  client = candidate;
  sessionStorage.setItem(KEY_STORAGE, apiKey);
  $("#key-id").textContent = `key ${apiKey.split("_")[1] ?? "…"}`;
  $("#signin").hidden = true;
  $("#account").hidden = false;
  $("#welcome").hidden = true;
  $("#tabs").hidden = false;
  showTab("upload");
}

function signOut() {
  sessionStorage.removeItem(KEY_STORAGE);
  location.reload();
}

/** @param {string} name */
function showTab(name) {
  for (const button of document.querySelectorAll("#tabs button")) {
    button.setAttribute("aria-selected", String(button.getAttribute("data-tab") === name));
  }
  for (const tab of ["upload", "live", "search", "usage"]) $(`#tab-${tab}`).hidden = tab !== name;
  if (name === "usage") showUsage().catch(notify);
}

// -- usage -------------------------------------------------------------------

/** Seconds as h:mm:ss. @param {number} seconds */
function hours(seconds) {
  const s = Math.round(seconds);
  return `${Math.floor(s / 3600)}:${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

/** One cell of a table row. @param {HTMLTableRowElement} row @param {string | Node} content */
function cell(row, content) {
  row.insertCell().append(content);
}

/** The tenant's usage this month and its quotas with their use (GET /v1/usage). */
async function showUsage() {
  const apiKey = sessionStorage.getItem(KEY_STORAGE);
  const response = await fetch("/v1/usage", { headers: { Authorization: `Bearer ${apiKey}` } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.message ?? `usage: HTTP ${response.status}`);
  const quotas = $("#quota-table tbody");
  quotas.replaceChildren();
  $("#no-quotas").hidden = body.quotas.length > 0;
  $("#quota-table").hidden = body.quotas.length === 0;
  for (const quota of body.quotas) {
    const row = quotas.insertRow();
    row.dataset.quota = quota.quota;
    const shown = (/** @type {number} */ n) =>
      quota.quota.includes("seconds") ? hours(n) : quota.quota.endsWith("bytes") ? `${Math.round(n / 1e5) / 10} MB` : String(n);
    cell(row, quota.quota.replaceAll("_", " "));
    cell(row, quota.key_id ? `key ${quota.key_id}` : "tenant");
    cell(row, quota.used === null ? "per upload" : shown(quota.used));
    cell(row, shown(quota.limit));
    const meter = document.createElement("meter");
    meter.max = Math.max(quota.limit, 1);
    meter.value = quota.used ?? 0;
    meter.high = meter.max * 0.8;
    cell(row, quota.used === null ? "" : meter);
    cell(row, quota.resets_at ? new Date(quota.resets_at).toLocaleString() : "");
  }
  $("#usage-total").textContent = hours(body.audio_seconds);
  const days = $("#usage-table tbody");
  days.replaceChildren();
  for (const entry of body.entries) {
    const row = days.insertRow();
    for (const text of [entry.day, entry.model, entry.kind, String(entry.sessions)]) cell(row, text);
    cell(row, hours(entry.audio_seconds));
  }
}

// -- upload ------------------------------------------------------------------

async function upload(/** @type {SubmitEvent} */ event) {
  event.preventDefault();
  clearNotice();
  const file = $("#file").files[0];
  if (!file || !client) return;
  const button = $("#upload-button");
  button.disabled = true;
  const view = new SessionView($("#upload-view"));
  view.setAudio(URL.createObjectURL(file));
  view.status("uploading…");
  try {
    const { feed } = await client.transcribe(file, {
      ...sessionOptions("upload"),
      prompts: phrases($("#upload-prompts").value).map((line, i) => promptOf(line, `p${i + 1}`)),
      diarize: $("#upload-diarize").checked,
      redact: $("#upload-redact").value || undefined,
      task: $("#upload-translate").checked ? "translate" : undefined,
      listeners: view.listeners(),
    });
    view.root.dataset.sid = feed.sid;
    await feed.done;
  } catch (error) {
    view.status("failed");
    notify(error);
  } finally {
    button.disabled = false;
  }
}

// -- live --------------------------------------------------------------------

/** @type {{feed: any, mic: any, prompts: Map<string, string>, next: number} | null} */
let live = null;

async function toggleRecording() {
  const button = $("#record");
  clearNotice();
  if (live) {
    button.disabled = true;
    $("#apply-prompts").disabled = true;
    const { feed, mic } = live;
    live = null;
    await mic.stop();
    setVad("finishing", "finishing…");
    await feed.done;
    setVad("idle", "idle");
    button.textContent = "Record";
    button.dataset.recording = "false";
    button.disabled = false;
    return;
  }
  if (!client) return;
  button.disabled = true;
  const view = new SessionView($("#live-view"));
  view.progress.hidden = true; // a live stream has no length to fill
  view.reconnectingText = "reconnecting… still recording: the audio is sent once the connection is back";
  const listeners = view.listeners();
  listeners.progress = (/** @type {any} */ m) => {
    view.status(m.status === "transcribing" ? "live" : m.status);
    if (m.speech !== null && m.speech !== undefined) setVad(m.speech ? "speech" : "silence", m.speech ? "speaking" : "silence");
    if (m.lag_ms !== null && m.lag_ms !== undefined) {
      const skipped = m.partials_skipped ? ` · ${m.partials_skipped} previews skipped (busy)` : "";
      $("#lag").textContent = `lag ${(m.lag_ms / 1000).toFixed(1)} s${skipped}`;
    }
  };
  const texts = phrases($("#live-prompts").value);
  const prompts = new Map(texts.map((text, i) => [text, `l${i + 1}`]));
  try {
    const { feed, mic } = await client.streamMicrophone(
      {
        ...sessionOptions("live"),
        prompts: [...prompts].map(([line, id]) => promptOf(line, id)),
        partial_interval_s: 1,
        diarize: $("#live-diarize").checked,
        ...($("#live-translate").checked ? { task: "translate" } : {}),
      },
      { listeners },
    );
    view.root.dataset.sid = feed.sid;
    mic.on("level", (/** @type {number} */ level) => ($("#level").value = level));
    live = { feed, mic, prompts, next: texts.length + 1 };
    button.textContent = "Stop";
    button.dataset.recording = "true";
    $("#apply-prompts").disabled = false;
    setVad("listening", "listening…");
  } catch (error) {
    view.status("failed");
    notify(error);
  } finally {
    button.disabled = false;
  }
}

/** @param {string} state @param {string} text */
function setVad(state, text) {
  const vad = $("#vad");
  vad.dataset.state = state;
  vad.textContent = text;
}

/** Send the difference between the prompts shown and those in force. */
async function applyPrompts() {
  if (!live || !client) return;
  const wanted = new Set(phrases($("#live-prompts").value));
  const add = [];
  const remove = [];
  for (const [text, id] of live.prompts) {
    if (!wanted.has(text)) {
      remove.push(id);
      live.prompts.delete(text);
    }
  }
  for (const text of wanted) {
    if (live.prompts.has(text)) continue;
    const id = `l${live.next++}`;
    live.prompts.set(text, id);
    add.push(promptOf(text, id));
  }
  if (!add.length && !remove.length) return;
  try {
    await client.changePrompts(live.feed.sid, { add, remove });
    notify(`prompts updated: ${add.length} added, ${remove.length} removed`, "info");
  } catch (error) {
    notify(error);
  }
}

// -- search ------------------------------------------------------------------

async function search(/** @type {SubmitEvent} */ event) {
  event.preventDefault();
  clearNotice();
  if (!client) return;
  const list = $("#search-results");
  try {
    const typed = $("#search-speaker").value.trim();
    const speaker = /^S[0-9]+$/i.test(typed) ? typed.toUpperCase() : typed;
    const filters = { fuzzy: $("#fuzzy").checked, size: 20, ...(speaker ? { speaker } : {}) };
    const page = await client.search($("#query").value, filters);
    list.replaceChildren();
    if (!page.hits.length) list.innerHTML = '<li class="meta">nothing found</li>';
    for (const hit of page.hits) {
      const item = document.createElement("li");
      item.dataset.sid = hit.sid;
      item.dataset.startMs = String(hit.start_ms);
      item.dataset.endMs = String(hit.end_ms);
      item.innerHTML = '<div class="said"></div><div class="meta"></div>';
      item.querySelector(".said").append(highlighted(hit.highlight || hit.text));
      item.querySelector(".meta").textContent = `${hit.sid} · ${clock(hit.start_ms)}–${clock(hit.end_ms)}`;
      if (hit.speaker) item.querySelector(".meta").prepend(speakerBadge(hit.speaker));
      item.addEventListener("click", () => openSession(hit.sid, hit.start_ms, hit.end_ms));
      list.append(item);
    }
  } catch (error) {
    notify(error);
  }
}

/** A stored session, its audio at the hit. @param {string} sid @param {number} startMs @param {number} endMs */
async function openSession(sid, startMs, endMs) {
  if (!client) return;
  const view = new SessionView($("#search-view"));
  view.root.dataset.sid = sid;
  try {
    const transcript = await client.transcript(sid);
    for (const segment of transcript.segments) view.segment(segment, false);
    for (const match of transcript.matches) view.match(match);
    view.progress.value = 100;
    view.status(`${transcript.segments.length} segments`);
    view.heard({ model: transcript.segments[0]?.model, language: transcript.language }, transcript.version);
    view.offerDownloads(sid);
    view.setAudio(URL.createObjectURL(await client.audio(sid)));
  } catch (error) {
    if (/** @type {any} */ (error).status !== 404) notify(error); // no audio kept (yet)
  }
  await view.seek(startMs, endMs);
  view.root.scrollIntoView({ behavior: "smooth" });
}

// -- wiring ------------------------------------------------------------------

$("#signin").addEventListener("submit", async (/** @type {SubmitEvent} */ event) => {
  event.preventDefault();
  clearNotice();
  try {
    await signIn($("#api-key").value.trim());
  } catch (error) {
    notify(error);
  }
});
$("#signout").addEventListener("click", signOut);
for (const button of document.querySelectorAll("#tabs button")) {
  button.addEventListener("click", () => showTab(button.getAttribute("data-tab") ?? "upload"));
}
$("#upload-form").addEventListener("submit", upload);
$("#record").addEventListener("click", toggleRecording);
$("#apply-prompts").addEventListener("click", applyPrompts);
$("#search-form").addEventListener("submit", search);

const saved = sessionStorage.getItem(KEY_STORAGE);
if (saved) signIn(saved).catch(() => sessionStorage.removeItem(KEY_STORAGE));
document.body.dataset.ready = "true";
