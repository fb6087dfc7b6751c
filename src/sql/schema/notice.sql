-- Last: at the commit, say in a NOTICE when no reconciler works in this
-- database and what to do instead.
SELECT durable.notice_status();
