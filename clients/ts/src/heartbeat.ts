/**
 * The tasks a worker holds, and the heartbeat that keeps their leases: one
 * durable_heartbeat_batch for all of them every third of the shortest
 * lease, on a connection of its own (a long step on the worker's connection
 * never starves it).  A task that comes back without a lease is lost: the
 * task's next call says so.  A beat gives up after a third of the lease (a
 * half-open socket never blocks it for good: query and connect timeouts,
 * TCP keepalive), and a task whose lease was last renewed more than two
 * thirds of it ago is lost too, whatever became of the beats: its lease
 * may be out, and another worker may hold it.
 *
 * Task ids and fences are 64-bit: node-postgres hands int8 out as strings,
 * and they stay strings (a JavaScript number cannot hold them).
 */
import type pg from 'pg';
import { apiSql, connect } from './session.js';

export interface Held {
  fence: string;
  leaseMs: number;
  /** when the statement that last renewed the lease was sent (Date.now()) */
  renewedAt: number;
}

export class Holdings {
  readonly held = new Map<string, Held>();
  readonly lost = new Set<string>();

  /** claimedAt: when the claim was sent, which is before its lease began */
  add(taskId: string, fence: string, leaseMs: number, claimedAt: number): void {
    this.held.set(taskId, { fence, leaseMs, renewedAt: claimedAt });
    this.lost.delete(taskId);
  }

  drop(taskId: string): void {
    this.held.delete(taskId);
    this.lost.delete(taskId);
  }

  /**
   * Why the task is lost: the heartbeat found its lease gone, or no beat
   * renewed it for two thirds of the lease; null while it is not (a task
   * not held is not lost).
   */
  lostBecause(taskId: string): string | null {
    if (this.lost.has(taskId)) return 'the heartbeat found it gone';
    const h = this.held.get(taskId);
    const since = h ? Date.now() - h.renewedAt : 0;
    if (!h || since <= (h.leaseMs * 2) / 3) return null;
    this.lost.add(taskId);
    return `no lease renewal for ${since} ms of its ${Math.round(h.leaseMs)} ms lease`;
  }

  isLost(taskId: string): boolean {
    return this.lostBecause(taskId) !== null;
  }
}

export class Heartbeat {
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly holdings: Holdings,
    private readonly connectionString: string,
    private readonly applicationName: string,
    private readonly log: (msg: string) => void,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.client?.end().catch(() => {});
    this.client = null;
  }

  /** A third of the shortest lease held; a second while nothing is held. */
  private schedule(): void {
    if (this.stopped) return;
    const leases = [...this.holdings.held.values()].map((h) => h.leaseMs);
    const period = leases.length ? Math.max(100, Math.min(...leases) / 3) : 1000;
    this.timer = setTimeout(() => { void this.beat().finally(() => this.schedule()); }, period);
  }

  private async beat(): Promise<void> {
    const ids = [...this.holdings.held.keys()];
    if (ids.length === 0) return;
    const fences = ids.map((id) => this.holdings.held.get(id)!.fence);
    // a beat that takes longer than a third of the shortest lease is given up
    const timeoutMs = Math.max(1000, Math.min(...ids.map((id) => this.holdings.held.get(id)!.leaseMs)) / 3);
    try {
      this.client ??= await connect(this.connectionString, this.applicationName, {
        connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs,
        keepAlive: true, keepAliveInitialDelayMillis: 10_000,
      });
      const sentAt = Date.now();
      const { rows } = await this.client.query<{ task_id: string; lease_until: Date | null }>(
        await apiSql(this.client,
          'SELECT task_id, lease_until'
          + ' FROM @api.durable_heartbeat_batch($1::pg_catalog.int8[], $2::pg_catalog.int8[])'),
        [ids, fences]);
      // one row per task, in the order given; a task given up meanwhile is not lost
      rows.forEach((r, i) => {
        const held = this.holdings.held.get(ids[i]);
        if (held?.fence !== fences[i]) return;
        if (r.lease_until === null) this.holdings.lost.add(ids[i]);
        else held.renewedAt = sentAt;
      });
    } catch (e) {
      this.log(`heartbeat: ${(e as Error).message}; reconnecting`);
      await this.client?.end().catch(() => {});
      this.client = null;
    }
  }
}
