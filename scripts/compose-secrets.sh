#!/usr/bin/env bash
# The secret files compose.yaml mounts, created once with random values (existing files are
# kept, so keys survive a rerun): deploy/compose/secrets/, which git ignores.
#
#   scripts/compose-secrets.sh [DIR]     (default deploy/compose/secrets)
#
# Files are 0644 inside a 0700 directory: compose bind-mounts them with their host owner, and
# the containers read them as their own users (Fetcher's is uid 10001). Needs only coreutils.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-deploy/compose/secrets}"
mkdir -p "$DIR"
chmod 0700 "$DIR"

random_token() {  # URL-safe, so that a password can sit inside DATABASE_URL unescaped
    head -c 32 /dev/urandom | base64 | tr -d '/+=\n' | head -c 40
}

write() {  # write NAME CONTENT: only when NAME does not exist yet
    local path="$DIR/$1"
    [[ -e "$path" ]] && return 0
    (umask 022 && printf '%s\n' "$2" >"$path.tmp" && mv "$path.tmp" "$path")
    echo "compose-secrets: wrote $path" >&2
}

read_secret() { head -n 1 "$DIR/$1"; }

# APP_ENC_KEY: standard base64 of 32 random bytes (contract §6.1).
write app_enc_key "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
write postgres_password "$(random_token)"
write database_url "postgresql://fetcher:$(read_secret postgres_password)@postgres:5432/fetcher"
write rabbitmq_password "$(random_token)"
write rabbitmq.conf "$(printf 'default_user = fetcher\ndefault_pass = %s' \
    "$(read_secret rabbitmq_password)")"
# AUTH_JWT_SECRET (HS256, §12.2): standard base64 of 32 random bytes; `fetcher dev-token` signs
# with it.
write auth_jwt_secret "$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
# One S3 identity per component, least privilege: the one-shot s3-init may create buckets,
# the Worker may only read, write and list the result bucket; the Manager has none.
write s3_secret_key "$(random_token)"
write s3_init_secret_key "$(random_token)"
write s3.json "$(printf '{"identities": [%s, %s]}' \
    "$(printf '{"name": "fetcher-init", "credentials": [{"accessKey": "fetcher-init", "secretKey": "%s"}], "actions": ["Admin:fetcher-results", "List"]}' \
        "$(read_secret s3_init_secret_key)")" \
    "$(printf '{"name": "fetcher-worker", "credentials": [{"accessKey": "fetcher-worker", "secretKey": "%s"}], "actions": ["Read:fetcher-results", "Write:fetcher-results", "List:fetcher-results"]}' \
        "$(read_secret s3_secret_key)")")"
