// The console's actions: each checks the role may, reads its form, restates
// its effect for a confirmation when it changes a task, then makes one call
// of durable's SQL API per task as that role and says what each did.

import { html, fmtTime } from './html.js';
import {
  DECISIONS, UserError, csrfField, intOrNull, jsonArg, layout, pgError, safeBack, taskId,
} from './view.js';

// Evidence says what a person checked: a JSON object whose "checked" names
// it, never the empty form a click through would leave.
function evidenceArg(text) {
  const v = JSON.parse(jsonArg(text, 'the evidence'));
  if (typeof v.checked !== 'string' || !v.checked.trim())
    throw new UserError('the evidence must say what was checked: {"checked": "..."} and what was found');
  return JSON.stringify(v);
}

// What a decision does, restated before it is made: for one task, or for
// each of several (ids an array)
function resolveEffect(ids, decision, step) {
  const many = Array.isArray(ids);
  const tasks = many ? `each of the ${ids.length} chosen tasks (${ids.join(', ')})` : `task ${ids}`;
  const s = step ? `step ${step} of ${tasks}` : `the step in doubt of ${tasks} (or the task itself)`;
  switch (decision) {
    case 'mark_committed':
      return `Record ${s} as committed: its side effect took place and will never be retried; the task goes on after it.`;
    case 'mark_not_executed':
      return `Record ${s} as not executed: it will be called again, under the same idempotency key.`;
    case 'mark_failed':
      return `Record ${s} as failed: the task fails, and only a replay gives it another run.`;
    case 'retry':
      return `Send ${tasks} back to work from where it stopped (refused while a step is in doubt).`;
    default:
      return `Cancel ${tasks}: it will never run again, and its unfinished children are cancelled with it.`;
  }
}

// a migration's versions, whether it is a dry run, and its evidence (a
// dry run's need not say what was checked: it changes nothing)
function migrationArgs(form) {
  const dry = form.get('dry_run') === '1';
  return {
    from: jsonArg(form.get('from') || '', 'from versions'),
    to: jsonArg(form.get('to') || '', 'to versions'),
    dry,
    evidence: dry ? jsonArg(form.get('evidence') || '', 'the evidence') : evidenceArg(form.get('evidence') || ''),
  };
}

// the chosen task ids of a form, at most max
function chosenIds(form, max) {
  const ids = form.getAll('task_id').map(taskId);
  if (!ids.length || ids.some((id) => !id)) throw new UserError('choose the tasks first');
  if (ids.length > max) throw new UserError(`choose at most ${max} tasks at a time`);
  return ids;
}

// one call per task, each its own transaction: what each did, or its error
async function eachTask(ctx, ids, run) {
  const rows = [];
  for (const id of ids) {
    try {
      rows.push({ task_id: id, outcome: await run(id) });
    } catch (err) {
      rows.push({ task_id: id, outcome: `refused: ${pgError(err)}` });
    }
  }
  return rows;
}

// an action that changes a task runs only once its effect was shown
function confirmed(form) {
  return form.get('confirm') === '1';
}

// The page that restates an action's effect: the same form, sent again
// with confirm=1, or back where it came from.
export function confirmPage(ctx, name, text, form) {
  const fields = [...form.entries()].filter(([k]) => k !== '_csrf' && k !== 'confirm');
  const back = safeBack(form.get('back'));
  return layout(ctx, 'Confirm', html`<section id="confirm"><p class="effect">${text}</p>
<form method="post" action="/action/${name}" class="actions">${csrfField(ctx)}
${fields.map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<input type="hidden" name="confirm" value="1">
<button>Confirm</button> <a href="${back}">Back, change nothing</a></form></section>`, { live: false });
}

export async function action(name, form, ctx) {
  const { caps, sql } = ctx;
  const need = (ok) => {
    if (!ok) throw new UserError(`role ${ctx.role} may not do that`);
  };
  const reason = (field = 'reason') => {
    const r = (form.get(field) || '').trim();
    if (!r) throw new UserError('give a reason');
    return r;
  };
  switch (name) {
    case 'resolve': {
      need(caps.resolve);
      const id = taskId(form.get('task_id'));
      if (!id) throw new UserError('not a task id');
      const decision = form.get('decision');
      if (!DECISIONS.includes(decision)) throw new UserError('choose a decision');
      const evidence = evidenceArg(form.get('evidence') || '');
      const step = form.get('step') || null;
      if (!confirmed(form)) return { kind: 'confirm', text: resolveEffect(id, decision, step) };
      const r = await ctx.query(sql.resolve, [id, decision, ctx.role, evidence, step]);
      ctx.audit({ action: 'resolve', task_id: id, decision, step, evidence: JSON.parse(evidence) });
      return { kind: 'ok', text: `Task ${id} resolved (${decision}${step ? ` of step ${step}` : ''}): it is now ${r.rows[0].state}.` };
    }
    case 'pause':
    case 'resume': {
      need(caps.pause);
      const queue = form.get('queue') || '';
      const why = reason();
      await ctx.query(name === 'pause' ? sql.pause : sql.resume, [queue, null]);
      ctx.audit({ action: name, queue, reason: why });
      return { kind: 'ok', text: `Queue ${queue} ${name === 'pause' ? 'paused' : 'resumed'}.` };
    }
    case 'pause_partition': {
      need(caps.pause);
      const queue = form.get('queue') || '';
      const partition = intOrNull(form.get('partition'), { min: 0, max: 32767 });
      if (partition === null) throw new UserError('name a partition');
      const op = form.get('op') === 'resume' ? 'resume' : 'pause';
      const why = reason();
      await ctx.query(op === 'pause' ? sql.pause : sql.resume, [queue, partition]);
      ctx.audit({ action: op, queue, partition, reason: why });
      return { kind: 'ok', text: `Partition ${partition} of ${queue} ${op === 'pause' ? 'paused' : 'resumed'}.` };
    }
    case 'quarantine':
    case 'cancel': {
      need(name === 'quarantine' ? caps.quarantine : caps.cancel);
      const id = taskId(form.get('task_id'));
      if (!id) throw new UserError('not a task id');
      const why = reason();
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: name === 'quarantine'
            ? `Quarantine task ${id}: it fails now, whatever its retries, and stays failed until a replay.`
            : resolveEffect(id, 'cancel', null),
        };
      await ctx.query(name === 'quarantine' ? sql.quarantine : sql.cancel, [id, why]);
      ctx.audit({ action: name, task_id: id, reason: why });
      return { kind: 'ok', text: `Task ${id} ${name === 'quarantine' ? 'quarantined' : 'cancelled'}.` };
    }
    case 'expire_lease': {
      need(caps.expire);
      const id = taskId(form.get('task_id'));
      if (!id) throw new UserError('not a task id');
      const why = reason();
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: `End the lease of task ${id} now: its worker's next write is refused, and the task is settled`
            + ' as for an expired lease (retried, or in review when a step in doubt may have taken effect).',
        };
      const r = await ctx.query(sql.expire, [id, why]);
      ctx.audit({ action: 'expire_lease', task_id: id, reason: why, outcome: r.rows[0].action });
      return { kind: 'ok', text: `The lease of task ${id} ended: ${r.rows[0].action}.` };
    }
    case 'emit': {
      need(caps.emit);
      const queue = form.get('queue') || '';
      const event = (form.get('event') || '').trim();
      if (!queue || !event) throw new UserError('name the queue and the event');
      const payload = jsonArg(form.get('payload') || '', 'the payload', { object: false });
      const note = reason('note');
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: `Emit event ${event} of queue ${queue} with payload ${payload}: every task of the queue that awaits it`
            + ' wakes with this payload, now or when it comes to wait for it. An event is emitted once: the same'
            + ' event again with another payload is refused.',
        };
      const r = await ctx.query(sql.emit, [queue, event, payload]);
      ctx.audit({ action: 'emit', queue, event, payload: JSON.parse(payload), note, first: r.rows[0].first });
      return { kind: 'ok', text: r.rows[0].first ? `Event ${event} of queue ${queue} emitted.` : `Event ${event} of queue ${queue} was emitted before with this payload: nothing changed.` };
    }
    case 'resolve_many': {
      need(caps.resolve);
      const ids = chosenIds(form, 200);
      const decision = form.get('decision');
      if (!DECISIONS.includes(decision)) throw new UserError('choose a decision');
      const evidence = evidenceArg(form.get('evidence') || '');
      const step = (form.get('step') || '').trim() || null;
      if (!confirmed(form)) return { kind: 'confirm', text: resolveEffect(ids, decision, step) };
      const rows = await eachTask(ctx, ids, async (id) => {
        const r = await ctx.query(sql.resolve, [id, decision, ctx.role, evidence, step]);
        ctx.audit({ action: 'resolve', task_id: id, decision, step, evidence: JSON.parse(evidence) });
        return `resolved: now ${r.rows[0].state}`;
      });
      const done = rows.filter((r) => r.outcome.startsWith('resolved')).length;
      return { kind: done === ids.length ? 'ok' : 'error', text: `Resolved ${done} of ${ids.length} chosen task(s) (${decision}).`, rows: { columns: ['task_id', 'outcome'], rows } };
    }
    case 'cancel_many': {
      need(caps.cancel);
      const ids = chosenIds(form, 1000);
      const why = reason();
      if (!confirmed(form)) return { kind: 'confirm', text: resolveEffect(ids, 'cancel', null) };
      const rows = await eachTask(ctx, ids, async (id) => {
        await ctx.query(sql.cancel, [id, why]);
        ctx.audit({ action: 'cancel', task_id: id, reason: why });
        return 'cancelled';
      });
      const done = rows.filter((r) => r.outcome === 'cancelled').length;
      return { kind: done === ids.length ? 'ok' : 'error', text: `Cancelled ${done} of ${ids.length} chosen task(s).`, rows: { columns: ['task_id', 'outcome'], rows } };
    }
    case 'migrate_queue': {
      need(caps.migrateQueue);
      const queue = form.get('queue') || '';
      const { from, to, dry, evidence } = migrationArgs(form);
      if (!dry && !confirmed(form))
        return {
          kind: 'confirm',
          text: `Migrate up to 1000 unfinished tasks of queue ${queue} pinned to ${from} to ${to}: each runs on under the new`
            + ' versions, a running one loses its lease; a task with a step in doubt is not moved.',
        };
      const r = await ctx.query(sql.migrateQueue, [queue, from, to, ctx.role, evidence, dry, 1000]);
      if (!dry) for (const row of r.rows) ctx.audit({ action: 'migrate', task_id: row.task_id, outcome: row.action, from: JSON.parse(from), to: JSON.parse(to) });
      const moved = r.rows.filter((x) => x.action === (dry ? 'would_migrate' : 'migrated')).length;
      return {
        kind: 'ok',
        text: dry ? `Dry run: ${moved} task(s) of ${queue} would move; nothing changed.` : `Migrated ${moved} task(s) of ${queue}.`,
        rows: { columns: ['task_id', 'state', 'from_versions', 'to_versions', 'action'], rows: r.rows },
      };
    }
    case 'schedule': {
      need(caps.scheduleOps);
      const name = form.get('schedule') || '';
      const what = form.get('op');
      if (!['pause', 'resume', 'trigger'].includes(what)) throw new UserError('not a schedule action');
      const why = reason();
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: {
            pause: `Pause schedule ${name}: it enqueues nothing until it is resumed, and the occurrences that fall due meanwhile are never enqueued.`,
            resume: `Resume schedule ${name} from its next occurrence after now; those it missed while paused are not enqueued.`,
            trigger: `Run schedule ${name} now: enqueue one occurrence of it now, apart from its expression.`,
          }[what],
        };
      const r = await ctx.query({ pause: sql.pauseSchedule, resume: sql.resumeSchedule, trigger: sql.triggerSchedule }[what], [name]);
      ctx.audit({ action: `schedule_${what}`, schedule: name, reason: why, ...r.rows[0] });
      return {
        kind: 'ok',
        text: what === 'pause' ? `Schedule ${name} paused.`
          : what === 'resume' ? `Schedule ${name} resumed: next run ${fmtTime(r.rows[0].next_run)}.`
            : `Schedule ${name} run now: task ${r.rows[0].task_id}.`,
      };
    }
    case 'replay_tasks': {
      need(caps.replayChosen);
      const ids = form.getAll('task_id').map(taskId);
      if (!ids.length || ids.some((id) => !id)) throw new UserError('choose the dead letters to replay');
      if (ids.length > 1000) throw new UserError('choose at most 1000 dead letters at a time');
      const note = reason('note');
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: `Replay ${ids.length} chosen failed task(s) (${ids.join(', ')}): each runs again from where it stopped,`
            + ' its attempts counted from zero; one that is no dead letter (any more) is left as it is.',
        };
      const r = await ctx.query(sql.replayChosen, [ids]);
      for (const row of r.rows) ctx.audit({ action: 'replay', task_id: row.task_id, outcome: row.action, note });
      const done = r.rows.filter((x) => x.action === 'replayed').length;
      return { kind: 'ok', text: `Replayed ${done} of ${ids.length} chosen task(s).`, rows: { columns: ['task_id', 'action'], rows: r.rows } };
    }
    case 'replay': {
      need(caps.replay);
      const queue = form.get('queue') || '';
      const batch = intOrNull(form.get('batch'), { min: 1, max: 100 }) ?? 10;
      const partition = intOrNull(form.get('partition'), { min: 0, max: 32767 });
      const filter = (form.get('filter') || '').trim() || null;
      const note = reason('note');
      if (!confirmed(form))
        return {
          kind: 'confirm',
          text: `Replay up to ${batch} failed task(s) of queue ${queue}${partition === null ? '' : `, partition ${partition}`}`
            + `${filter ? ` that stopped for ${filter}` : ''}, oldest first: each runs again from where it stopped, its attempts counted from zero.`,
        };
      const r = await ctx.query(sql.replay, [queue, batch, partition, filter]);
      ctx.audit({ action: 'replay', queue, batch, partition, filter, note, tasks: r.rows.map((x) => x.task_id) });
      return { kind: 'ok', text: `Replayed ${r.rows.length} task(s) of ${queue}.`, rows: { columns: ['task_id', 'action'], rows: r.rows } };
    }
    case 'migrate': {
      need(caps.migrate);
      const id = taskId(form.get('task_id'));
      if (!id) throw new UserError('not a task id');
      const { from, to, dry, evidence } = migrationArgs(form);
      if (!dry && !confirmed(form))
        return {
          kind: 'confirm',
          text: `Migrate task ${id} from ${from} to ${to}: it runs on under the new versions, and a running task loses its lease.`,
        };
      const r = await ctx.query(sql.migrate, [id, from, to, ctx.role, evidence, dry]);
      if (!dry) ctx.audit({ action: 'migrate', task_id: id, from: JSON.parse(from), to: JSON.parse(to), evidence: JSON.parse(evidence) });
      return {
        kind: 'ok',
        text: dry ? 'Dry run: nothing changed.' : `Task ${id} migrated.`,
        rows: { columns: ['task_id', 'state', 'from_versions', 'to_versions', 'action'], rows: r.rows },
      };
    }
    default:
      throw new UserError('no such action');
  }
}
