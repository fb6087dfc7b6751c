--
-- The data of a database at durable 0.4.0, as pg_dump --data-only
-- --load-via-partition-root wrote it (PostgreSQL 15), for
-- test/t/017_upgrade_0_4.pl: made by the 0.4.0 library (f846414) with the
-- calls of test/t/data/durable-0.4.0-calls.sql, then dumped.  Tasks asleep,
-- awaiting an event not yet emitted, joining a child, running with a step
-- started, finished with a step, failed; events emitted before anybody
-- awaited them and one received; a schedule overdue; request keys, inbox
-- and outbox.  Times are those of the day it was made.
--
--
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Data for Name: emitted_events; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.emitted_events (partition_key, event, payload, payload_hash, emitted_at, role, created_at) FROM stdin;
14610	e1	\N	\N	\N	\N	2026-12-01 21:45:14.453898+00
29139	e2	{"early": true}	\\xe275339bd7edb94cb5bf604d83f9517c4b8aee87995304d2c25710800ff7306a	2026-12-01 21:45:14.455566+00	postgres	2026-12-01 21:45:14.455566+00
24705	e3	{"seen": true}	\\xb332ad4bdb0f101afd79dc097e59e8ad1f0ef6365b3336bff255d7566debdfc8	2026-12-01 21:45:14.456846+00	postgres	2026-12-01 21:45:14.456846+00
\.

--
-- Data for Name: event_log_default; Type: TABLE DATA; Schema: durable; Owner: -
--

-- load via partition root durable.event_log

COPY durable.event_log (partition_key, task_id, seq, state, fence, at, kind, actor, detail, step, role, lease_seq, lease_fence, lease_at, lease_kind, lease_actor, lease_role) FROM stdin;
19360	507275184282028960	1	ready	0	2026-12-01 21:45:14.445923+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184282028960	3	waiting	2	2026-12-01 21:45:14.449948+00	waiting	w1	{"kind": "sleep", "wait": "nap", "until": "2026-12-01T21:45:15.449948+00:00"}	\N	postgres	2	1	2026-12-01 21:45:14.447884+00	claimed	w1	postgres
19360	507275184290417568	1	ready	0	2026-12-01 21:45:14.452919+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184290417568	3	waiting	2	2026-12-01 21:45:14.453898+00	waiting	w1	{"kind": "event", "wait": "hook", "until": "2126-12-01T21:45:14.453898+00:00"}	\N	postgres	2	1	2026-12-01 21:45:14.453398+00	claimed	w1	postgres
19360	507275184298806176	1	ready	0	2026-12-01 21:45:14.457234+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184298806176	3	running	1	2026-12-01 21:45:14.458065+00	wait_ended	w1	{"wait": "got", "status": "received"}	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184307194784	1	ready	0	2026-12-01 21:45:14.461739+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
27259	507275184315591291	1	ready	0	2026-12-01 21:45:14.462707+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184307194784	3	running	1	2026-12-01 21:45:14.462707+00	spawned	w1	{"child": "kid", "queue": "side", "task_id": 507275184315591291}	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184307194784	4	waiting	2	2026-12-01 21:45:14.463647+00	waiting	w1	{"kind": "join", "wait": "kids"}	\N	postgres	2	1	2026-12-01 21:45:14.462278+00	claimed	w1	postgres
9091	507275184323961731	1	ready	0	2026-12-01 21:45:14.465305+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
9091	507275184323961731	3	running	1	2026-12-01 21:45:14.4669+00	step_planned	w2	{"class": "idempotent", "idempotency_key": "b6f9f7318802ecff8f58900795a1d18527fca792ac2405eaba9237081d67dd9b"}	charge	postgres	\N	\N	\N	\N	\N	\N
9091	507275184323961731	4	running	1	2026-12-01 21:45:14.468015+00	step_started	w2	{"to": "started", "from": "planned", "attempt": 1, "version": 2}	charge	postgres	\N	\N	\N	\N	\N	\N
9091	507275184323961731	5	running	1	2026-12-01 21:45:14.468675+00	step_committed	w2	{"to": "committed", "from": "started", "attempt": 1, "version": 3}	charge	postgres	\N	\N	\N	\N	\N	\N
9091	507275184332350339	1	ready	0	2026-12-01 21:45:14.470053+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184340749216	1	ready	0	2026-12-01 21:45:14.471479+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
19360	507275184340749216	3	running	1	2026-12-01 21:45:14.472194+00	step_planned	w3	{"class": "idempotent", "idempotency_key": "32ced34311941d64175c288ce99fd90201fadabd5c5b818e232edd1f8fdc669f"}	mail	postgres	\N	\N	\N	\N	\N	\N
19360	507275184340749216	4	running	1	2026-12-01 21:45:14.472677+00	step_started	w3	{"to": "started", "from": "planned", "attempt": 1, "version": 2}	mail	postgres	\N	\N	\N	\N	\N	\N
19360	507275184349137824	1	ready	0	2026-12-01 21:45:14.473061+00	enqueued	postgres	\N	\N	postgres	\N	\N	\N	\N	\N	\N
\.

--
-- Data for Name: event_waits; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.event_waits (partition_key, event, task_id, name) FROM stdin;
14610	e1	507275184290417568	hook
\.

--
-- Data for Name: history_horizon; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.history_horizon (one, removed_before, events_checked_at) FROM stdin;
\.

--
-- Data for Name: idempotency_keys; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.idempotency_keys (partition_key, scope, key, request_hash, completed, created_at, locked_until, expires_at, recovery_point, response, fence) FROM stdin;
26547	http	req-1	\\xf9d86028c6e0d64e225186f96acb69338b2c59764df79162107f5c4bb34d1310	t	2026-12-01 21:45:14.474682+00	2026-12-01 21:45:14.47538+00	2126-12-01 21:45:14.47538+00	finished	{"r": 1}	1
\.

--
-- Data for Name: inbox; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.inbox (partition_key, consumer, message_id, payload_hash, received_at) FROM stdin;
5753	consumer	msg-1	\\xbc63c11b44d5eb79770fe8aca3e9f3b2584df4400db74d94ce48710ea2305541	2026-12-01 21:45:14.475927+00
\.

--
-- Data for Name: installation; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.installation (installation_id, installed_at) FROM stdin;
2161ab30-91bb-41a2-878c-d68667f16ad3	2026-12-01 21:45:14.323992+00
\.

--
-- Data for Name: live_steps; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.live_steps (partition_key, task_id, step, state, class, version, attempt, ordinal, created_at, updated_at, idempotency_key, request_hash, compensates, receipt, effect_id, error_class, request, result, evidence, error) FROM stdin;
19360	507275184340749216	mail	started	idempotent	2	1	3	2026-12-01 21:45:14.472194+00	2026-12-01 21:45:14.472677+00	32ced34311941d64175c288ce99fd90201fadabd5c5b818e232edd1f8fdc669f	\\x95dc1fab8e076aea1efd6a17f37200a5d08d2095ab050af4c2e95ef9cd9bbd48	\N	\N	\N	\N	{"to": "a"}	\N	\N	\N
\.

--
-- Data for Name: live_tasks; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.live_tasks (partition_key, task_id, priority, max_attempts, checkpoint_version, steps_in_doubt, class, created_at, deadline, queue_name, idempotency_key, request_hash, workflow_version, payload, metadata, checkpoint, result, last_error, stop_code, stuck_alarm_at, finished_at, claim_fence, final_kind, final_actor, final_role, final_detail, run_at, state, attempt, version, fence, lease_until, heartbeat_at, progress_at, lease, owner, progress, claimed_at, claim_seq, claim_kind, claim_role, parent_id, concurrency_key, waits) FROM stdin;
19360	507275184307194784	0	5	0	0	idempotent	2026-12-01 21:45:14.461739+00	\N	old	\N	\N	\N	{"case": "parent"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	infinity	waiting	0	4	2	\N	2026-12-01 21:45:14.462278+00	2026-12-01 21:45:14.462278+00	\N	w1	\N	2026-12-01 21:45:14.462278+00	2	claimed	postgres	\N	\N	{"kid": {"at": "2026-12-01T21:45:14.462707+00:00", "args": {"queue": "side", "payload_sha256": "23805f35a65548036ab742ae701c4bdab6c03217296608ce69350298f8c719a9"}, "kind": "spawn", "status": "spawned", "task_id": 507275184315591291}, "kids": {"at": "2026-12-01T21:45:14.463647+00:00", "args": {"timeout": null, "children": null}, "kind": "join", "status": "waiting"}}
19360	507275184282028960	0	5	0	0	idempotent	2026-12-01 21:45:14.445923+00	\N	old	\N	\N	\N	{"case": "sleep"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	2026-12-01 21:45:15.449948+00	waiting	0	3	2	\N	2026-12-01 21:45:14.447884+00	2026-12-01 21:45:14.447884+00	\N	w1	\N	2026-12-01 21:45:14.447884+00	2	claimed	postgres	\N	\N	{"nap": {"at": "2026-12-01T21:45:14.449948+00:00", "args": {"duration": {"days": 0, "months": 0, "microseconds": 1000000}}, "kind": "sleep", "until": "2026-12-01T21:45:15.449948+00:00", "status": "sleeping"}}
19360	507275184290417568	0	5	0	0	idempotent	2026-12-01 21:45:14.452919+00	\N	old	\N	\N	\N	{"case": "await"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	2126-12-01 21:45:14.453898+00	waiting	0	3	2	\N	2026-12-01 21:45:14.453398+00	2026-12-01 21:45:14.453398+00	\N	w1	\N	2026-12-01 21:45:14.453398+00	2	claimed	postgres	\N	\N	{"hook": {"at": "2026-12-01T21:45:14.453898+00:00", "args": {"event": "e1", "timeout": {"days": 0, "months": 1200, "microseconds": 0}}, "kind": "event", "until": "2126-12-01T21:45:14.453898+00:00", "status": "waiting"}}
27259	507275184315591291	0	3	0	0	idempotent	2026-12-01 21:45:14.462707+00	\N	side	\N	\N	\N	{"case": "child"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	2026-12-01 21:45:14.462707+00	ready	0	1	0	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	507275184307194784	\N	\N
19360	507275184340749216	0	5	0	1	idempotent	2026-12-01 21:45:14.471479+00	\N	old	\N	\N	\N	{"case": "running"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	2026-12-01 21:45:14.471479+00	running	1	4	1	2026-12-01 21:45:15.471837+00	2026-12-01 21:45:14.471837+00	2026-12-01 21:45:14.471837+00	00:00:01	w3	\N	2026-12-01 21:45:14.471837+00	2	claimed	postgres	\N	\N	\N
19360	507275184349137824	0	5	0	0	idempotent	2026-12-01 21:45:14.473061+00	\N	old	\N	\N	\N	{"case": "ready"}	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	2026-12-01 21:45:14.473061+00	ready	0	1	0	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N	\N
\.

--
-- Data for Name: outbox; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.outbox (partition_key, message_id, fence, attempt, created_at, lease_until, published_at, topic, key, publisher, payload) FROM stdin;
23701	507275184282033301	0	0	2026-12-01 21:45:14.47649+00	\N	\N	topic	k1	\N	{"o": 1}
\.

--
-- Data for Name: queues; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.queues (queue_name, partition_base, partitions, lease, max_attempts, retry_base, retry_cap, deadline, retry_capacity, retry_refill_rate, retry_tokens, retry_tokens_at, progress_timeout, notify, paused, created_at, restricted, concurrency_limit) FROM stdin;
old	19360	1	01:00:00	5	2	60	\N	\N	10	0	2026-12-01 21:45:14.44172+00	\N	f	f	2026-12-01 21:45:14.44172+00	f	\N
side	27259	1	01:00:00	3	2	60	\N	\N	10	0	2026-12-01 21:45:14.444154+00	\N	f	f	2026-12-01 21:45:14.444154+00	f	\N
fin	9091	1	01:00:00	3	2	60	\N	\N	10	0	2026-12-01 21:45:14.445389+00	\N	f	f	2026-12-01 21:45:14.445389+00	f	\N
\.

--
-- Data for Name: queue_grants; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.queue_grants (queue_name, grantee, privilege) FROM stdin;
\.

--
-- Data for Name: schedules; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.schedules (schedule_name, cron, timezone, queue_name, payload, backfill, next_run, last_run, last_task_id, created_at, role) FROM stdin;
nightly	0 3 * * *	UTC	old	{"case": "scheduled"}	f	2026-12-01 20:45:14.474325+00	\N	\N	2026-12-01 21:45:14.473424+00	postgres
\.

--
-- Data for Name: step_history_default; Type: TABLE DATA; Schema: durable; Owner: -
--

-- load via partition root durable.step_history

COPY durable.step_history (partition_key, task_id, step, state, class, version, attempt, ordinal, created_at, updated_at, idempotency_key, request_hash, compensates, receipt, effect_id, error_class, request, result, evidence, error, finished_at) FROM stdin;
9091	507275184323961731	charge	committed	idempotent	3	1	3	2026-12-01 21:45:14.4669+00	2026-12-01 21:45:14.468675+00	b6f9f7318802ecff8f58900795a1d18527fca792ac2405eaba9237081d67dd9b	\\xba0045583c6e765a5ba6d529a963e2fda41f894a79277f5f94b51f8184a3936a	\N	\N	\N	\N	{"amount": 5}	{"charged": 5}	\N	\N	2026-12-01 21:45:14.469116+00
\.

--
-- Data for Name: task_history_default; Type: TABLE DATA; Schema: durable; Owner: -
--

-- load via partition root durable.task_history

COPY durable.task_history (partition_key, task_id, priority, max_attempts, checkpoint_version, steps_in_doubt, class, created_at, deadline, queue_name, idempotency_key, request_hash, workflow_version, payload, metadata, checkpoint, result, last_error, stop_code, stuck_alarm_at, finished_at, claim_fence, final_kind, final_actor, final_role, final_detail, run_at, state, attempt, version, fence, lease_until, heartbeat_at, progress_at, lease, owner, progress, claimed_at, claim_seq, claim_kind, claim_role, parent_id, concurrency_key, waits) FROM stdin;
19360	507275184298806176	0	5	0	0	idempotent	2026-12-01 21:45:14.457234+00	\N	old	\N	\N	\N	{"case": "received"}	\N	\N	{"done": "received"}	\N	\N	\N	2026-12-01 21:45:14.459084+00	1	completed	w1	postgres	\N	2026-12-01 21:45:14.457234+00	completed	1	4	1	\N	2026-12-01 21:45:14.457595+00	2026-12-01 21:45:14.457595+00	\N	w1	\N	2026-12-01 21:45:14.457595+00	2	claimed	postgres	\N	\N	{"got": {"at": "2026-12-01T21:45:14.458065+00:00", "args": {"event": "e3", "timeout": {"days": 0, "months": 1200, "microseconds": 0}}, "kind": "event", "until": "2126-12-01T21:45:14.458065+00:00", "status": "received", "payload": {"seen": true}, "resolved_at": "2026-12-01T21:45:14.458065+00:00"}}
9091	507275184323961731	0	3	0	0	idempotent	2026-12-01 21:45:14.465305+00	\N	fin	done-1	\\x520942ddd8658e820dd9d42a0966e09c7f58cd1744232e0667152354f925b483	\N	{"case": "done"}	\N	\N	{"ok": true}	\N	\N	\N	2026-12-01 21:45:14.469116+00	1	completed	w2	postgres	\N	2026-12-01 21:45:14.465305+00	completed	1	6	1	\N	2026-12-01 21:45:14.466433+00	2026-12-01 21:45:14.466433+00	\N	w2	\N	2026-12-01 21:45:14.466433+00	2	claimed	postgres	\N	\N	\N
9091	507275184332350339	0	3	0	0	idempotent	2026-12-01 21:45:14.470053+00	\N	fin	\N	\N	\N	{"case": "failed"}	\N	\N	\N	{"why": "bad card"}	fail_permanent	\N	2026-12-01 21:45:14.470878+00	1	failed	w2	postgres	{"action": "fail_permanent", "attempt": 1, "elapsed_ms": 0, "error_class": "permanent", "max_attempts": 3}	2026-12-01 21:45:14.470053+00	failed	1	3	1	\N	2026-12-01 21:45:14.470436+00	2026-12-01 21:45:14.470436+00	\N	w2	\N	2026-12-01 21:45:14.470436+00	2	claimed	postgres	\N	\N	\N
\.

--
-- Data for Name: task_keys; Type: TABLE DATA; Schema: durable; Owner: -
--

COPY durable.task_keys (partition_key, queue_name, idempotency_key, task_id, request_hash, created_at) FROM stdin;
9091	fin	done-1	507275184323961731	\\x520942ddd8658e820dd9d42a0966e09c7f58cd1744232e0667152354f925b483	2026-12-01 21:45:14.465305+00
\.

--
-- Name: outbox_fence_seq; Type: SEQUENCE SET; Schema: durable; Owner: -
--

SELECT pg_catalog.setval('durable.outbox_fence_seq', 60471914324000, true);

--
-- Name: outbox_seq; Type: SEQUENCE SET; Schema: durable; Owner: -
--

SELECT pg_catalog.setval('durable.outbox_seq', 60471914325, true);

--
-- Name: task_seq; Type: SEQUENCE SET; Schema: durable; Owner: -
--

SELECT pg_catalog.setval('durable.task_seq', 60471914333, true);

--
--

