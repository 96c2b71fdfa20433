#!/usr/bin/env bash
# Make sure the machine has what the test suite talks to: a redis-server binary (the suite starts its own
# server on a free port), Debian's Chromium, Dovecot (the email kind's IMAP peer), and for `make bench` a Redis
# answering on 127.0.0.1:6379.
set -euo pipefail

apt_install() {
  if command -v apt-get >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
  else
    echo "please install: $*" >&2
    return 1
  fi
}

redis_answers() {
  if command -v redis-cli >/dev/null 2>&1; then
    redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG
  else
    (exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null
  fi
}

command -v redis-server >/dev/null 2>&1 || apt_install redis-server
if ! redis_answers; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/switchboard-test-redis.log
  for _ in $(seq 50); do redis_answers && break; sleep 0.1; done
  redis_answers || { echo "could not start redis-server on 127.0.0.1:6379" >&2; exit 1; }
fi

# the email kind's tests run a throwaway Dovecot IMAP server (tests/fakes/mail_server.py)
command -v dovecot >/dev/null 2>&1 || [ -x /usr/sbin/dovecot ] || apt_install dovecot-imapd

if [ ! -x /usr/bin/chromium ]; then
  apt_install chromium
fi
echo "test services ready: redis on 127.0.0.1:6379, $(/usr/bin/chromium --version 2>/dev/null || echo 'chromium missing')"
