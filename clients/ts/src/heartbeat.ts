/**
 * The tasks a worker holds, and the heartbeat that keeps their leases: one
 * durable_heartbeat_batch for all of them every third of the shortest
 * lease, on a connection of its own (a long step on the worker's connection
 * never starves it).  A task that comes back without a lease is lost: the
 * task's next call says so.
 *
 * Task ids and fences are 64-bit: node-postgres hands int8 out as strings,
 * and they stay strings (a JavaScript number cannot hold them).
 */
import type pg from 'pg';
import { connect } from './session.js';

export interface Held {
  fence: string;
  leaseMs: number;
}

export class Holdings {
  readonly held = new Map<string, Held>();
  readonly lost = new Set<string>();

  add(taskId: string, fence: string, leaseMs: number): void {
    this.held.set(taskId, { fence, leaseMs });
    this.lost.delete(taskId);
  }

  drop(taskId: string): void {
    this.held.delete(taskId);
    this.lost.delete(taskId);
  }

  /** The heartbeat found the task's lease gone (a task not held is not lost). */
  isLost(taskId: string): boolean {
    return this.lost.has(taskId);
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
    try {
      this.client ??= await connect(this.connectionString, this.applicationName);
      const { rows } = await this.client.query<{ task_id: string; lease_until: Date | null }>(
        'SELECT task_id, lease_until FROM durable_heartbeat_batch($1::bigint[], $2::bigint[])',
        [ids, fences]);
      // one row per task, in the order given; a task given up meanwhile is not lost
      rows.forEach((r, i) => {
        if (r.lease_until === null && this.holdings.held.get(ids[i])?.fence === fences[i])
          this.holdings.lost.add(ids[i]);
      });
    } catch (e) {
      this.log(`heartbeat: ${(e as Error).message}; reconnecting`);
      await this.client?.end().catch(() => {});
      this.client = null;
    }
  }
}
