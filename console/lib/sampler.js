// Samples the queues' counts every few seconds into a ring buffer in memory,
// one per role (pool), for the charts.  With durable.queue_gauges (counts
// of the unfinished tasks only) and durable.queue_counters (counters in
// shared memory, monotonic from server start), a sample reads no history:
// gauges come from the one, rates from the other.  A durable without them
// has only durable.queue_stats, which counts every finished task retained:
// then the sampler reads it less often when it is slow, and rates come from
// the differences of its counts, which fall when retention drops a day
// (such a fall is left out of the rate).

// Samples in time order, [{t (ms), queues: {name: {ready, ..., counters}}}],
// as series for the charts: the live ones of a Sampler, or those of
// durable.queue_samples over hours (storedSamples).
export class Series {
  constructor(samples = []) {
    this.samples = samples;
  }

  // series of one gauge per queue: [{name, points: [[t, v], ...]}]
  gauge(field, queueFilter) {
    const names = new Set();
    for (const s of this.samples) for (const n of Object.keys(s.queues)) names.add(n);
    return [...names]
      .filter((n) => !queueFilter || n === queueFilter)
      .sort()
      .map((name) => ({
        name,
        points: this.samples
          .filter((s) => s.queues[name] && typeof s.queues[name][field] === 'number')
          .map((s) => [s.t, s.queues[name][field]]),
      }));
  }

  // per-second rate of a counter per queue, from the counters when present
  rate(field, queueFilter) {
    const names = new Set();
    for (const s of this.samples) for (const n of Object.keys(s.queues)) names.add(n);
    return [...names]
      .filter((n) => !queueFilter || n === queueFilter)
      .sort()
      .map((name) => {
        const points = [];
        for (let i = 1; i < this.samples.length; i++) {
          const a = this.samples[i - 1].queues[name];
          const b = this.samples[i].queues[name];
          if (!a || !b) continue;
          let va;
          let vb;
          if (a.counters && b.counters) {
            if (a.counters.reset !== b.counters.reset) continue;
            va = a.counters[field];
            vb = b.counters[field];
          } else {
            va = a[field];
            vb = b[field];
          }
          if (typeof va !== 'number' || typeof vb !== 'number' || vb < va) continue;
          const dt = (this.samples[i].t - this.samples[i - 1].t) / 1000;
          if (dt > 0) points.push([this.samples[i].t, (vb - va) / dt]);
        }
        return { name, points };
      });
  }
}

export class Sampler extends Series {
  constructor(entry, { intervalMs = 5000, capacity = 360 } = {}) {
    super();
    this.entry = entry;
    this.intervalMs = intervalMs;
    this.capacity = capacity;
    this.timer = null;
    this.lastError = null;
    // without queue_gauges: the last reading of durable.queue_stats, when,
    // and what it cost
    this.queueStats = null;
    this.queueStatsAt = null;
    this.queueStatsMs = null;
  }

  // queue_stats counts the finished tasks retained: when the sampler reads
  // it (no queue_gauges) and that costs much, sample less often (20 times
  // its cost at least)
  nextDelay() {
    if (this.entry.caps.gauges) return this.intervalMs;
    return Math.max(this.intervalMs, 20 * (this.queueStatsMs || 0));
  }

  start() {
    if (this.running) return;
    this.running = true;
    const loop = async () => {
      await this.sample();
      if (!this.running) return;
      this.timer = setTimeout(loop, this.nextDelay());
      this.timer.unref();
    };
    loop();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = null;
  }

  async sample() {
    const { pool, sql, caps } = this.entry;
    if (!caps.overview && !caps.counters) return;
    try {
      const t = Date.now();
      const queues = {};
      if (caps.gauges) {
        for (const r of (await pool.query(sql.gauges)).rows) {
          queues[r.queue_name] = {
            ready: Number(r.ready),
            waiting: Number(r.waiting),
            running: Number(r.running),
            needs_review: Number(r.needs_review),
            scheduled: Number(r.scheduled),
            oldest_ready_s: Number(r.oldest_due_s),
          };
        }
      } else if (caps.queueStats) {
        const started = Date.now();
        const rows = (await pool.query(sql.queueStats)).rows;
        this.queueStatsMs = Date.now() - started;
        this.queueStats = rows;
        this.queueStatsAt = new Date();
        for (const r of rows) {
          queues[r.queue_name] = {
            ready: Number(r.ready),
            waiting: Number(r.waiting),
            running: Number(r.running),
            needs_review: Number(r.needs_review),
            completed: Number(r.completed),
            failed: Number(r.failed),
          };
        }
      }
      if (caps.counters) {
        for (const r of (await pool.query(sql.counters)).rows) {
          const q = (queues[r.queue_name] ||= {});
          q.counters = {
            enqueued: Number(r.enqueued),
            completed: Number(r.completed),
            failed: Number(r.failed),
            cancelled: Number(r.cancelled),
            dead_lettered: Number(r.dead_lettered),
            reset: r.stats_reset ? String(r.stats_reset) : null,
          };
        }
      }
      this.samples.push({ t, queues });
      if (this.samples.length > this.capacity) this.samples.shift();
      this.lastError = null;
    } catch (err) {
      this.lastError = err.message;
    }
  }

}

// The samples the reconciler kept in durable.queue_samples (a row per queue
// and time, sql.samples), as Series: the gauges, and the counters where
// durable is preloaded.
export function storedSamples(rows) {
  const byTime = new Map();
  for (const r of rows) {
    const t = Number(r.t) * 1000;
    if (!byTime.has(t)) byTime.set(t, { t, queues: {} });
    const q = {
      ready: Number(r.ready),
      running: Number(r.running),
      needs_review: Number(r.needs_review),
      oldest_ready_s: Number(r.oldest_ready_s),
    };
    if (r.counters_since !== null)
      q.counters = { completed: Number(r.completed), failed: Number(r.failed), reset: String(r.counters_since) };
    byTime.get(t).queues[r.queue_name] = q;
  }
  return new Series([...byTime.values()].sort((a, b) => a.t - b.t));
}
