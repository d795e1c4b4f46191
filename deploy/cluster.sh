#!/usr/bin/env bash
# A three-node kubers control plane: three apiservers, each embedding one
# member of the store, replicating over TLS, behind a haproxy front end that
# fails over between them.
#
#   deploy/cluster.sh up                # PKI if missing, start the nodes and
#                                       # haproxy, write admin.kubeconfig
#   deploy/cluster.sh status            # per node: running, /readyz, raft
#                                       # member/leader; the members; haproxy
#   deploy/cluster.sh start NODE        # start one node again (same flags)
#   deploy/cluster.sh stop NODE         # SIGTERM one node, wait until it exits
#   deploy/cluster.sh rolling-restart   # restart the nodes one at a time
#   deploy/cluster.sh replace NODE      # member remove, wipe, member add
#                                       # --learner, start, promote
#   deploy/cluster.sh down              # stop the nodes and haproxy (data kept)
#   deploy/cluster.sh clean [--delete-hosts-pki]
#                                       # down, then delete the cluster dir
#                                       # (only one cluster.sh made; one with
#                                       # hosts/ only with the flag)
#   deploy/cluster.sh pki [--node NAME=HOST[,HOST...]]... [--lb-name NAME]...
#                                       # only the certificates and keys
#   deploy/cluster.sh hosts --node NAME=HOST[,HOST...] (3, 5, 7...)
#                           --lb-name NAME [--lb-port PORT] [--lb-host HOST]
#                                       # real hosts: PKI, per-host env files
#                                       # for deploy/systemd, haproxy.cfg for
#                                       # the load balancer, the commands
#
# Layout of the cluster dir (CLUSTER_DIR, default /tmp/kubers-cluster):
#   .kubers-cluster    the mark that cluster.sh made the dir (clean wants it)
#   cluster.env        names and ports, fixed at the first `up`
#   admin.kubeconfig   the admin user, through haproxy
#   pki/               ca.{crt,key}, admin.{crt,key}, sa.{key,pub}, and
#                      nodes/NAME/ (the node's --pki-dir: ca.crt,
#                      apiserver.{crt,key}, peer.{crt,key}, admin.{crt,key},
#                      sa.{key,pub})
#   data/NAME/         the node's --data-dir (its store is data/NAME/store)
#   run/NAME.{args,pid,log}, run/haproxy.{cfg,pid,log}, run/haproxy-stats.sock
#   hosts/             what `hosts` writes
#
# Environment (read at the first `up`, then taken from cluster.env):
#   NODE_NAMES    default n1,n2,n3
#   SECURE_PORTS  the nodes' HTTPS ports, default 16444,16445,16446
#   CLIENT_PORTS  the stores' plaintext etcd client ports (on 127.0.0.1),
#                 default 12379,12389,12399
#   PEER_PORTS    the stores' TLS peer ports, default 12380,12390,12400
#   LB_PORT       haproxy's port, the one kubectl uses, default 16443
#   LB_NAME       an extra SAN of the serving certificates, default localhost
#   SHUTDOWN_DELAY  the nodes' --shutdown-delay-duration, default 5s: /readyz
#                 fails that long after SIGTERM before the node stops
#                 accepting, longer than haproxy's 3 s to take it out;
#                 a number with a unit each (5s, 1m, 1m30s, 500ms)
#   EXTRA_ARGS    more apiserver flags for every node (split on spaces)
# Any time:
#   APISERVER_BIN  the apiserver binary (default: this checkout's, built
#                  first with cargo)
#   HAPROXY_BIN    default haproxy
#   START_TIMEOUT  seconds to wait for /readyz and catch-up, default 120
#   STOP_TIMEOUT   seconds between SIGTERM and SIGKILL, default 60
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${CLUSTER_DIR:-/tmp/kubers-cluster}"
pki="$dir/pki"
run="$dir/run"
start_timeout="${START_TIMEOUT:-120}"
stop_timeout="${STOP_TIMEOUT:-60}"
cert_days="${CERT_DAYS:-365}"
ca_days="${CA_DAYS:-3650}"

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

usage() {
  cat >&2 << 'EOF'
usage: deploy/cluster.sh COMMAND
  up | down | status | rolling-restart
  start NODE | stop NODE | replace NODE
  clean [--delete-hosts-pki]
  pki [--node NAME=HOST[,HOST...]]... [--lb-name NAME]...
  hosts --node NAME=HOST[,HOST...] (3, 5, 7... of them) --lb-name NAME...
        [--lb-port PORT] [--lb-host HOST]
EOF
  exit 2
}

# bad_usage MESSAGE: MESSAGE, then the usage; exit status 2.
bad_usage() {
  echo "cluster.sh: $*" >&2
  usage
}

# is_port VALUE: whether VALUE is a TCP port number (1-65535).
is_port() {
  [[ "$1" =~ ^[1-9][0-9]{0,4}$ ]] && [ "$1" -le 65535 ]
}

# is_duration VALUE: whether VALUE is a duration both kube's flags (Go's
# time.ParseDuration) and the apiserver's (humantime) read the same way:
# numbers each with a unit, h, m, s, ms, us or ns (5s, 1m30s). A bare
# number is not one (Go refuses "5": "missing unit in duration").
is_duration() {
  [[ "$1" =~ ^([0-9]+(h|m|s|ms|us|ns))+$ ]]
}

# is_name VALUE: whether VALUE can name a node: it becomes a directory
# name, a member name and a certificate's CN.
is_name() {
  [[ "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]
}

etcdctl_at() {
  local ep="$1"
  shift
  ETCDCTL_API=3 etcdctl --endpoints="$ep" --dial-timeout=2s --command-timeout=5s "$@"
}

# ---------------------------------------------------------------- PKI

# is_ip HOST: whether HOST is an IPv4 or IPv6 address (else a DNS name).
is_ip() {
  [[ "$1" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ || "$1" == *:* ]]
}

# san_list HOST...: the hosts as an openssl subjectAltName value, without
# duplicates, in order.
san_list() {
  local h out=() seen=" "
  for h in "$@"; do
    [ -n "$h" ] || continue
    case "$seen" in *" $h "*) continue ;; esac
    seen="$seen$h "
    if is_ip "$h"; then out+=("IP:$h"); else out+=("DNS:$h"); fi
  done
  (IFS=,; echo "${out[*]}")
}

# keygen FILE: a new P-256 key, readable by its owner only, unless FILE
# exists (a key whose certificate was not written yet is reused).
keygen() {
  [ -s "$1" ] && return
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.tmp" && mv "$1.tmp" "$1")
}

serial() {
  echo "0x$(openssl rand -hex 16)"
}

# ensure_ca: the cluster CA, unless it exists. A CA certificate without
# its key is kept (every node trusts it; a new CA would mean new
# certificates everywhere), but nothing can be issued with it then.
ensure_ca() {
  mkdir -p "$pki"
  if [ -s "$pki/ca.crt" ]; then
    echo "kept $pki/ca.crt"
    return
  fi
  keygen "$pki/ca.key"
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=kubers-ca" -days "$ca_days" -set_serial "$(serial)" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$pki/ca.crt.tmp"
  mv "$pki/ca.crt.tmp" "$pki/ca.crt"
  echo "created $pki/ca.crt"
}

# cert_sans CRT: the subjectAltName of certificate CRT as san_list writes
# it (IP:..., DNS:..., comma-separated); nothing if it has none.
cert_sans() {
  openssl x509 -in "$1" -noout -ext subjectAltName 2>/dev/null | tail -n +2 | tr -d ' ' | sed 's/IPAddress:/IP:/g'
}

# key_matches CRT KEY: whether KEY is the private key of certificate CRT.
key_matches() {
  local a b
  a="$(openssl x509 -in "$1" -noout -pubkey 2>/dev/null)" || return 1
  b="$(openssl pkey -in "$2" -pubout 2>/dev/null)" || return 1
  [ -n "$a" ] && [ "$a" = "$b" ]
}

# issue BASE SUBJECT EKU SANS: BASE.key and BASE.crt signed by the CA,
# unless BASE.crt exists with its key. EKU is serverAuth, clientAuth or
# both; SANS an openssl subjectAltName value (may be empty). A certificate
# whose key is missing, or is not its key, is useless: both are issued
# again, with a new key.
issue() {
  local base="$1" subj="$2" eku="$3" sans="$4" why=""
  if [ -s "$base.crt" ]; then
    if [ ! -s "$base.key" ]; then
      why="$base.key is missing"
    elif ! key_matches "$base.crt" "$base.key"; then
      why="$base.key is not the key of $base.crt"
    else
      echo "kept $base.crt"
      if [ -n "$sans" ]; then
        local have
        have="$(cert_sans "$base.crt")"
        [ "$have" = "$sans" ] || echo "warning: $base.crt names $have, not $sans; delete it and $base.key to issue it again" >&2
      fi
      return
    fi
  fi
  [ -s "$pki/ca.key" ] || die "cannot issue $base.crt${why:+ ($why)}: $pki/ca.key is missing (restore it; or, to start a new CA that no node trusts yet, delete $pki and run pki again)"
  if [ -n "$why" ]; then
    echo "$why: issuing $base.crt again with a new key"
    rm -f "$base.crt" "$base.key"
  fi
  mkdir -p "$(dirname "$base")"
  keygen "$base.key"
  local ext
  ext="$(mktemp)"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } > "$ext"
  openssl req -new -key "$base.key" -subj "$subj" \
    | openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "$(serial)" -days "$cert_days" \
      -extfile "$ext" -out "$base.crt.tmp" 2>/dev/null
  rm -f "$ext"
  mv "$base.crt.tmp" "$base.crt"
  echo "created $base.crt"
}

# serving_sans LB_NAMES HOST...: the SANs of a node's serving certificate:
# its hosts, the load balancer's names (comma-separated), loopback and the
# in-cluster names of the kubernetes Service.
serving_sans() {
  local -a lbs
  IFS=, read -r -a lbs <<< "$1"
  shift
  san_list "$@" "${lbs[@]+"${lbs[@]}"}" localhost 127.0.0.1 kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local
}

# ensure_pki LB_NAMES NODE_SPEC...: the CA, the admin certificate, the
# ServiceAccount key pair, and per node (NODE_SPEC is NAME=HOST[,HOST...])
# a serving and a peer certificate in pki/nodes/NAME, which also gets a
# copy of what a node needs besides (the apiserver's --pki-dir layout).
# LB_NAMES: comma-separated names of the load balancer. Existing files are
# kept, except a certificate without its key (issued again) and a node's
# copy that differs from pki/'s (copied again).
ensure_pki() {
  local lb_names="$1" spec name hosts
  shift
  ensure_ca
  issue "$pki/admin" "/O=system:masters/CN=kubernetes-admin" clientAuth ""
  if [ -s "$pki/sa.key" ]; then
    echo "kept $pki/sa.key"
  else
    keygen "$pki/sa.key"
    # A new private key: its public half too.
    rm -f "$pki/sa.pub"
    echo "created $pki/sa.key"
  fi
  [ -s "$pki/sa.pub" ] || openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
  for spec in "$@"; do
    name="${spec%%=*}" hosts="${spec#*=}"
    { [ -n "$name" ] && [ -n "$hosts" ] && [ "$name" != "$spec" ]; } || die "--node wants NAME=HOST[,HOST...], got $spec"
    is_name "$name" || die "--node $spec: a node name is letters, digits, '.', '_' and '-', starting with a letter or digit"
    local -a hs
    IFS=, read -r -a hs <<< "$hosts"
    local nd="$pki/nodes/$name"
    mkdir -p "$nd"
    issue "$nd/apiserver" "/CN=kube-apiserver" serverAuth "$(serving_sans "$lb_names" "${hs[@]}")"
    issue "$nd/peer" "/CN=$name" serverAuth,clientAuth "$(san_list "${hs[@]}")"
    local f
    for f in ca.crt admin.crt admin.key sa.key sa.pub; do
      if [ ! -e "$nd/$f" ]; then
        cp -p "$pki/$f" "$nd/$f"
      elif ! cmp -s "$pki/$f" "$nd/$f"; then
        cp -p "$pki/$f" "$nd/$f"
        echo "updated $nd/$f (it differed from $pki/$f)"
      fi
    done
  done
}

# ---------------------------------------------------------------- layout

# The variables cluster.env fixes.
config_vars=(NODE_NAMES SECURE_PORTS CLIENT_PORTS PEER_PORTS LB_PORT LB_NAME SHUTDOWN_DELAY EXTRA_ARGS)

# load_config: the names and ports of the cluster in $dir, from its
# cluster.env once written, else from the environment. A variable of the
# environment that cluster.env sets otherwise is ignored, with a warning.
load_config() {
  if [ -f "$dir/cluster.env" ]; then
    local v
    local -A env_value=()
    for v in "${config_vars[@]}"; do
      [ -z "${!v+set}" ] || env_value[$v]="${!v}"
    done
    # shellcheck source=/dev/null
    . "$dir/cluster.env"
    for v in "${!env_value[@]}"; do
      [ "${env_value[$v]}" = "${!v}" ] \
        || echo "warning: ignoring $v=${env_value[$v]} from the environment: $dir/cluster.env fixes $v=${!v} (clean and up again to change it)" >&2
    done
  fi
  NODE_NAMES="${NODE_NAMES:-n1,n2,n3}"
  SECURE_PORTS="${SECURE_PORTS:-16444,16445,16446}"
  CLIENT_PORTS="${CLIENT_PORTS:-12379,12389,12399}"
  PEER_PORTS="${PEER_PORTS:-12380,12390,12400}"
  LB_PORT="${LB_PORT:-16443}"
  LB_NAME="${LB_NAME:-localhost}"
  SHUTDOWN_DELAY="${SHUTDOWN_DELAY:-5s}"
  EXTRA_ARGS="${EXTRA_ARGS:-}"
  IFS=, read -r -a names <<< "$NODE_NAMES"
  IFS=, read -r -a secure_ports <<< "$SECURE_PORTS"
  IFS=, read -r -a client_ports <<< "$CLIENT_PORTS"
  IFS=, read -r -a peer_ports <<< "$PEER_PORTS"
  local n="${#names[@]}"
  { [ "${#secure_ports[@]}" -eq "$n" ] && [ "${#client_ports[@]}" -eq "$n" ] && [ "${#peer_ports[@]}" -eq "$n" ]; } \
    || die "NODE_NAMES, SECURE_PORTS, CLIENT_PORTS and PEER_PORTS must list as many entries"
}

# check_config: refuses a layout the nodes cannot run with, before
# anything is saved or started: where it came from (cluster.env or the
# environment) is named, since cluster.env would keep a bad value.
check_config() {
  local from="the environment" n p seen=" "
  [ ! -f "$dir/cluster.env" ] || from="$dir/cluster.env"
  is_duration "$SHUTDOWN_DELAY" \
    || die "SHUTDOWN_DELAY=$SHUTDOWN_DELAY (from $from) is not a duration: give numbers with units, as kube's --shutdown-delay-duration takes them (5s, 1m, 1m30s)"
  for n in "${names[@]}"; do
    is_name "$n" || die "NODE_NAMES: '$n' (from $from) is not a node name (letters, digits, '.', '_', '-')"
    case "$seen" in *" $n "*) die "NODE_NAMES: $n twice (from $from)" ;; esac
    seen="$seen$n "
  done
  seen=" "
  for p in "${secure_ports[@]}" "${client_ports[@]}" "${peer_ports[@]}" "$LB_PORT"; do
    is_port "$p" || die "'$p' (from $from) is not a port (SECURE_PORTS, CLIENT_PORTS, PEER_PORTS, LB_PORT)"
    case "$seen" in *" $p "*) die "port $p is given twice (from $from: SECURE_PORTS, CLIENT_PORTS, PEER_PORTS, LB_PORT)" ;; esac
    seen="$seen$p "
  done
}

save_config() {
  mkdir -p "$dir"
  [ -f "$dir/cluster.env" ] && return
  {
    echo "# The layout of this cluster, fixed at its first up."
    printf 'NODE_NAMES=%q\nSECURE_PORTS=%q\nCLIENT_PORTS=%q\nPEER_PORTS=%q\nLB_PORT=%q\nLB_NAME=%q\nSHUTDOWN_DELAY=%q\nEXTRA_ARGS=%q\n' \
      "$NODE_NAMES" "$SECURE_PORTS" "$CLIENT_PORTS" "$PEER_PORTS" "$LB_PORT" "$LB_NAME" "$SHUTDOWN_DELAY" "$EXTRA_ARGS"
  } > "$dir/cluster.env"
}

# The mark that cluster.sh made $dir: `clean` deletes no dir without it.
marker_file=.kubers-cluster

# owned: whether cluster.sh made $dir: it has the mark, or a cluster.env
# (written by every up, also before there was a mark).
owned() {
  [ -f "$dir/$marker_file" ] || [ -f "$dir/cluster.env" ]
}

# claim_dir: $dir as cluster.sh's, with the mark that clean looks for:
# created, or an empty dir, or one that is cluster.sh's already (the mark,
# a cluster.env, or a pki/ca.crt of cluster.sh's CA from before there was a
# mark). Any other dir is refused, so that clean can never delete a dir
# that holds something else.
claim_dir() {
  if [ -d "$dir" ] && ! owned && [ -n "$(ls -A "$dir")" ] \
    && [ "$(openssl x509 -in "$pki/ca.crt" -noout -subject -nameopt oneline 2>/dev/null)" != "subject=CN = kubers-ca" ]; then
    die "$dir is not empty and not a cluster dir (no $marker_file, cluster.env or pki/ca.crt of cluster.sh); set CLUSTER_DIR to a new or empty dir"
  fi
  mkdir -p "$dir"
  [ -f "$dir/$marker_file" ] \
    || echo "Made by deploy/cluster.sh, which deletes this dir on clean." > "$dir/$marker_file"
}

require_cluster() {
  [ -f "$dir/cluster.env" ] || die "no cluster in $dir (run up first, or set CLUSTER_DIR)"
  load_config
}

# index NAME: the position of node NAME.
index() {
  local i
  for i in "${!names[@]}"; do
    [ "${names[$i]}" != "$1" ] || { echo "$i"; return; }
  done
  die "no node $1 (nodes: ${names[*]})"
}

peer_url() { echo "https://127.0.0.1:${peer_ports[$1]}"; }
client_url() { echo "http://127.0.0.1:${client_ports[$1]}"; }
# etcdctl 3.4 wants its endpoints without the scheme.
client_ep() { echo "127.0.0.1:${client_ports[$1]}"; }
api_url() { echo "https://127.0.0.1:${secure_ports[$1]}"; }

initial_cluster() {
  local i parts=()
  for i in "${!names[@]}"; do parts+=("${names[$i]}=$(peer_url "$i")"); done
  (IFS=,; echo "${parts[*]}")
}

# node_flags NAME DATA_DIR PKI_DIR BIND_ADDRESS SECURE_PORT CLIENT_URL
# LISTEN_PEER_URL ADVERTISE_PEER_URL INITIAL_CLUSTER STATE SHUTDOWN_DELAY:
# a node's apiserver flags, one a line; deploy/systemd/kubers-apiserver.service
# passes the same ones. PKI_DIR is the node's dir of pki/nodes/NAME.
node_flags() {
  printf '%s\n' --name "$1" --data-dir "$2" --pki-dir "$3" \
    --bind-address "$4" --secure-port "$5" --shutdown-delay-duration "${11}" \
    --tls-cert-file "$3/apiserver.crt" --tls-private-key-file "$3/apiserver.key" --client-ca-file "$3/ca.crt" \
    --etcd-listen-client-url "$6" \
    --etcd-listen-peer-url "$7" --initial-advertise-peer-urls "$8" \
    --initial-cluster "$9" --initial-cluster-state "${10}" \
    --peer-cert-file "$3/peer.crt" --peer-key-file "$3/peer.key" --peer-trusted-ca-file "$3/ca.crt" \
    --peer-client-cert-auth
}

# write_args I STATE INITIAL_CLUSTER: node I's apiserver flags, one a line,
# in run/NAME.args; every later start of the node uses them.
write_args() {
  local i="$1" n="${names[$1]}"
  mkdir -p "$run"
  {
    node_flags "$n" "$dir/data/$n" "$pki/nodes/$n" 127.0.0.1 "${secure_ports[$i]}" "$(client_url "$i")" \
      "$(peer_url "$i")" "$(peer_url "$i")" "$3" "$2" "$SHUTDOWN_DELAY"
    local -a extra
    read -r -a extra <<< "$EXTRA_ARGS"
    [ "${#extra[@]}" -eq 0 ] || printf '%s\n' "${extra[@]}"
  } > "$run/$n.args.tmp"
  mv "$run/$n.args.tmp" "$run/$n.args"
}

# ---------------------------------------------------------------- processes

# The apiserver binary: APISERVER_BIN, or this checkout's, built (or brought
# up to date) first.
apiserver_bin() {
  if [ -n "${APISERVER_BIN:-}" ]; then
    echo "$APISERVER_BIN"
    return
  fi
  local target
  target="$(cd "$here" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  (cd "$here" && cargo build --quiet --bin apiserver) >&2
  echo "$target/debug/apiserver"
}

# pid_of PIDFILE MARK: the pid in PIDFILE if that process runs and has MARK
# among its arguments (so a pid reused by another process is not taken for
# ours); else nothing.
pid_of() {
  [ -f "$1" ] || return 0
  local pid
  pid="$(cat "$1")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 0
  tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$2" && echo "$pid"
  return 0
}

node_pid() { pid_of "$run/${names[$1]}.pid" "$dir/data/${names[$1]}"; }
haproxy_pid() { pid_of "$run/haproxy.pid" "$run/haproxy.cfg"; }

# launch I: starts node I with its saved flags.
launch() {
  local n="${names[$1]}" args f
  # The apiserver creates a whole new PKI in its --pki-dir when a file is
  # missing there: never start it on an incomplete one.
  for f in ca.crt apiserver.crt apiserver.key admin.crt admin.key peer.crt peer.key; do
    [ -s "$pki/nodes/$n/$f" ] || die "$pki/nodes/$n/$f is missing (deploy/cluster.sh pki writes it again)"
  done
  mapfile -t args < "$run/$n.args"
  mkdir -p "$dir/data/$n"
  nohup "$bin" "${args[@]}" >> "$run/$n.log" 2>&1 < /dev/null &
  echo $! > "$run/$n.pid"
  echo "started $n (pid $!), log $run/$n.log"
}

# terminate PID WHAT: SIGTERM, then wait until PID is gone; SIGKILL after
# STOP_TIMEOUT seconds. PID may have exited already (down signals every
# node first): it is then reported stopped at once.
terminate() {
  local pid="$1" what="$2"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + stop_timeout))
  while still_running "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "$what (pid $pid) did not exit within ${stop_timeout}s of SIGTERM; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while still_running "$pid"; do
        [ "$SECONDS" -lt "$deadline" ] || die "$what (pid $pid) still runs after SIGKILL"
        sleep 0.1
      done
      break
    fi
    sleep 0.1
  done
  echo "stopped $what (pid $pid)"
}

# still_running PID: whether PID runs (and is not a zombie).
still_running() {
  kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# stop_node I [PID]: stops node I. PID: its pid as found before (down
# signals every node first; one may be gone before it is waited for).
stop_node() {
  local pid="${2:-}"
  [ -n "$pid" ] || pid="$(node_pid "$1")"
  if [ -n "$pid" ]; then
    terminate "$pid" "${names[$1]}"
  else
    echo "${names[$1]} was not running"
  fi
  rm -f "$run/${names[$1]}.pid"
}

# ready I: whether node I answers /readyz with 200 (anonymous, as haproxy
# asks; kube keeps the health paths public).
ready() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 --cacert "$pki/ca.crt" "$(api_url "$1")/readyz" 2>/dev/null)" = 200 ]
}

wait_ready() {
  local deadline=$((SECONDS + start_timeout))
  until ready "$1"; do
    [ -n "$(node_pid "$1")" ] || die "${names[$1]} exited; see $run/${names[$1]}.log"
    [ "$SECONDS" -lt "$deadline" ] || die "${names[$1]} not ready after ${start_timeout}s: $(curl -s --max-time 3 --cacert "$pki/ca.crt" "$(api_url "$1")/readyz?verbose" | grep '^\[-\]' | tr '\n' ' ')"
    sleep 0.2
  done
  echo "${names[$1]} is ready"
}

# store_status I: node I's store as "ID IS_LEADER IS_LEARNER TERM INDEX
# APPLIED [ERRORS]" (etcdctl endpoint status, whose simple format compares
# the 64-bit IDs exactly; its JSON rounds them to doubles). Fails if the
# store does not answer.
store_status() {
  local out
  out="$(etcdctl_at "$(client_ep "$1")" endpoint status -w simple 2>/dev/null)" || return 1
  awk -F', ' 'NR == 1 { print $2, $5, $6, $7, $8, $9, $10 }' <<< "$out"
}

# leader_index: the position of the node whose store is the raft leader;
# nothing if no reachable store is.
leader_index() {
  local i id is_leader rest
  for i in "${!names[@]}"; do
    read -r id is_leader rest < <(store_status "$i" || true) || continue
    [ "$is_leader" != true ] || { echo "$i"; return; }
  done
  return 0
}

# wait_caught_up I: waits until node I's store has applied everything the
# leader had committed when this started waiting.
wait_caught_up() {
  local deadline=$((SECONDS + start_timeout)) l target="" applied=0 id is_leader learner term rest
  while [ -z "$target" ]; do
    l="$(leader_index)"
    if [ -n "$l" ]; then
      read -r id is_leader learner term target rest < <(store_status "$l" || true) || target=
    fi
    [ -n "$target" ] || [ "$SECONDS" -lt "$deadline" ] || die "no leader to catch up with after ${start_timeout}s"
    [ -n "$target" ] || sleep 0.2
  done
  while :; do
    read -r id is_leader learner term _ applied rest < <(store_status "$1" || true) || applied=0
    [ "${applied:-0}" -lt "$target" ] || break
    [ "$SECONDS" -lt "$deadline" ] || die "${names[$1]} applied ${applied:-0} of the leader's $target after ${start_timeout}s"
    sleep 0.2
  done
  echo "${names[$1]} caught up (applied $applied >= the leader's commit index $target)"
}

# ---------------------------------------------------------------- haproxy

# haproxy_cfg BIND CA_FILE LOG STATS_SOCKET GLOBAL NAME=HOST:PORT...: a TCP front
# end passing TLS through to the nodes. Checks /readyz of each over HTTPS
# (verified with the cluster CA), so a node that is down, has no store
# quorum or is shutting down gets no new connections. A connection that
# fails to reach a node is retried on another one (retries + redispatch),
# so a node that died since the last check costs no request. Client and
# server timeouts are long so watches stay open (client-go keeps its
# connections alive with HTTP/2 pings meanwhile). GLOBAL: more lines of the
# global section, separated by ';' (may be empty).
haproxy_cfg() {
  local bind="$1" ca="$2" log="$3" stats="$4" global="$5" s
  shift 5
  cat << EOF
# Written by deploy/cluster.sh. TCP mode: TLS goes through to the
# apiservers, which authenticate clients by their certificates.
global
  log $log
EOF
  local -a lines
  IFS=';' read -r -a lines <<< "$global"
  for s in "${lines[@]+"${lines[@]}"}"; do
    echo "  $s"
  done
  cat << EOF

defaults
  mode tcp
  timeout connect 3s
  # Watches stay open for up to an hour (kube ends them after 30-60 min).
  timeout client 1h
  timeout server 1h
  timeout tunnel 1h
  timeout client-fin 10s
  timeout server-fin 10s
  timeout check 3s
  # A node that refuses or drops the connection attempt: try again, on
  # another node (redispatch at every retry).
  retries 3
  option redispatch 1

frontend kube-apiserver
  bind $bind
  log global
  option tcplog
  option dontlognull
  default_backend kube-apiserver

backend kube-apiserver
  balance roundrobin
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host kubernetes
  http-check expect status 200
  # Down after 3 failed checks 1 s apart, up again after 2 good ones; a
  # node's --shutdown-delay-duration (/readyz failing before it stops
  # accepting) is longer than the 3 s it takes to be marked down.
  default-server check check-ssl verify required ca-file "$ca" inter 1s fall 3 rise 2 init-addr last,libc,none
EOF
  for s in "$@"; do
    echo "  server ${s%%=*} ${s#*=}"
  done
  if [ -n "$stats" ]; then
    cat << EOF

# Server states for cluster.sh (status, rolling-restart):
#   curl --unix-socket $stats 'http://haproxy/;csv'
listen stats
  mode http
  bind unix@$stats
  stats enable
  stats uri /
EOF
  fi
}

# lb_state NAME: haproxy's state of node NAME (UP, DOWN, ...; UP 1/2 while
# it rises), or nothing if haproxy does not answer.
lb_state() {
  local csv
  csv="$(curl -s --max-time 2 --unix-socket "$run/haproxy-stats.sock" 'http://haproxy/;csv' 2>/dev/null)" || return 0
  awk -F, -v n="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "status") c = i } $1 == "kube-apiserver" && $2 == n { print $c }' <<< "$csv"
}

wait_lb_up() {
  local deadline=$((SECONDS + start_timeout))
  until [ "$(lb_state "${names[$1]}")" = UP ]; do
    [ -n "$(haproxy_pid)" ] || die "haproxy is not running; see $run/haproxy.log"
    [ "$SECONDS" -lt "$deadline" ] || die "haproxy does not report ${names[$1]} up after ${start_timeout}s (state: $(lb_state "${names[$1]}"))"
    sleep 0.2
  done
}

# port_in_use PORT: whether something accepts connections on
# 127.0.0.1:PORT (a listener on 0.0.0.0 or [::] does too).
port_in_use() {
  (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null
}

# check_ports_free: refuses to start when a port of a node that is not
# running, or haproxy's while it is not running, is taken: by another
# cluster (another CLUSTER_DIR) or any other program. haproxy would still
# fail to bind (noreuseport), but this says so before anything starts.
check_ports_free() {
  local i p busy=()
  for i in "${!names[@]}"; do
    [ -z "$(node_pid "$i")" ] || continue
    for p in "${secure_ports[$i]}" "${client_ports[$i]}" "${peer_ports[$i]}"; do
      if port_in_use "$p"; then busy+=("$p (${names[$i]})"); fi
    done
  done
  if [ -z "$(haproxy_pid)" ] && port_in_use "$LB_PORT"; then busy+=("$LB_PORT (LB_PORT, haproxy)"); fi
  [ "${#busy[@]}" -eq 0 ] && return
  local fix="choose free ports (LB_PORT, SECURE_PORTS, CLIENT_PORTS, PEER_PORTS)"
  [ ! -f "$dir/cluster.env" ] || fix="free them, or clean this cluster and up again with other ports (they are fixed in $dir/cluster.env)"
  die "port in use on 127.0.0.1: ${busy[*]}; another cluster or program listens there: $fix"
}

start_haproxy() {
  local i servers=()
  for i in "${!names[@]}"; do servers+=("${names[$i]}=127.0.0.1:${secure_ports[$i]}"); done
  # noreuseport: without it haproxy binds with SO_REUSEPORT, and a second
  # cluster's haproxy on the same LB_PORT would start too and take half of
  # this one's connections.
  haproxy_cfg "127.0.0.1:$LB_PORT" "$pki/ca.crt" "stdout format raw local0 info" "$run/haproxy-stats.sock" noreuseport "${servers[@]}" > "$run/haproxy.cfg.tmp"
  "${HAPROXY_BIN:-haproxy}" -c -q -f "$run/haproxy.cfg.tmp" || die "haproxy refuses $run/haproxy.cfg.tmp"
  mv "$run/haproxy.cfg.tmp" "$run/haproxy.cfg"
  local pid
  pid="$(haproxy_pid)"
  if [ -n "$pid" ]; then
    echo "haproxy already running (pid $pid)"
    return
  fi
  nohup "${HAPROXY_BIN:-haproxy}" -db -f "$run/haproxy.cfg" >> "$run/haproxy.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$run/haproxy.pid"
  # It binds every port before it serves its stats socket; one it cannot
  # bind (LB_PORT taken since the check) makes it exit.
  local deadline=$((SECONDS + 10))
  until curl -s --max-time 1 --unix-socket "$run/haproxy-stats.sock" 'http://haproxy/;csv' > /dev/null 2>&1; do
    if ! still_running "$pid"; then
      rm -f "$run/haproxy.pid"
      die "haproxy exited at start (port $LB_PORT in use?): $(tail -n 3 "$run/haproxy.log" | tr '\n' ' ')"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      terminate "$pid" haproxy > /dev/null
      rm -f "$run/haproxy.pid"
      die "haproxy did not start within 10s; see $run/haproxy.log"
    fi
    sleep 0.1
  done
  echo "started haproxy (pid $pid) on 127.0.0.1:$LB_PORT, log $run/haproxy.log"
}

# write_kubeconfig FILE SERVER: the admin user's kubeconfig, certificates
# embedded.
write_kubeconfig() {
  b64() { base64 -w0 < "$1"; }
  (umask 077 && cat > "$1.tmp" << EOF
apiVersion: v1
kind: Config
clusters:
- name: kubers
  cluster:
    server: $2
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: kubernetes-admin
  user:
    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")
contexts:
- name: kubernetes-admin@kubers
  context:
    cluster: kubers
    user: kubernetes-admin
    namespace: default
current-context: kubernetes-admin@kubers
EOF
  )
  mv "$1.tmp" "$1"
}

# ---------------------------------------------------------------- commands

loopback_specs() {
  local i
  for i in "${!names[@]}"; do echo "${names[$i]}=127.0.0.1,localhost"; done
}

cmd_pki() {
  local specs=() lbs=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --node) [ $# -ge 2 ] || die "--node wants a value"; specs+=("$2"); shift 2 ;;
      --lb-name) [ $# -ge 2 ] || die "--lb-name wants a value"; lbs+=("$2"); shift 2 ;;
      *) bad_usage "pki: unknown argument $1" ;;
    esac
  done
  load_config
  claim_dir
  if [ "${#specs[@]}" -eq 0 ]; then
    mapfile -t specs < <(loopback_specs)
  fi
  [ "${#lbs[@]}" -gt 0 ] || lbs=("$LB_NAME")
  ensure_pki "$(IFS=,; echo "${lbs[*]}")" "${specs[@]}"
}

cmd_up() {
  load_config
  check_config
  [ ! -d "$dir/hosts" ] || die "$dir holds the PKI and files of real hosts (hosts/); give a loopback cluster its own CLUSTER_DIR"
  check_ports_free
  claim_dir
  save_config
  local specs
  mapfile -t specs < <(loopback_specs)
  ensure_pki "$LB_NAME" "${specs[@]}" > /dev/null
  bin="$(apiserver_bin)"
  [ -x "$bin" ] || die "no apiserver binary at $bin"
  local i ic
  ic="$(initial_cluster)"
  for i in "${!names[@]}"; do
    [ -f "$run/${names[$i]}.args" ] || write_args "$i" new "$ic"
  done
  # haproxy first: if it cannot have LB_PORT, no node was started for
  # nothing.
  start_haproxy
  for i in "${!names[@]}"; do
    if [ -n "$(node_pid "$i")" ]; then
      echo "${names[$i]} already running (pid $(node_pid "$i"))"
    else
      launch "$i"
    fi
  done
  write_kubeconfig "$dir/admin.kubeconfig" "https://127.0.0.1:$LB_PORT"
  for i in "${!names[@]}"; do wait_ready "$i"; done
  for i in "${!names[@]}"; do wait_lb_up "$i"; done
  echo "cluster up: https://127.0.0.1:$LB_PORT (haproxy) in front of $(for i in "${!names[@]}"; do printf '%s ' "$(api_url "$i")"; done)"
  echo "export KUBECONFIG=$dir/admin.kubeconfig"
}

cmd_start() {
  require_cluster
  local i
  i="$(index "$1")"
  bin="$(apiserver_bin)"
  if [ -n "$(node_pid "$i")" ]; then
    echo "${names[$i]} already running (pid $(node_pid "$i"))"
  else
    launch "$i"
  fi
  wait_ready "$i"
  wait_caught_up "$i"
  [ -z "$(haproxy_pid)" ] || wait_lb_up "$i"
}

cmd_stop() {
  require_cluster
  local i
  i="$(index "$1")"
  stop_node "$i"
}

cmd_down() {
  require_cluster
  local i pid pids=()
  for i in "${!names[@]}"; do
    pid="$(node_pid "$i")"
    pids[i]="$pid"
    [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
  done
  for i in "${!names[@]}"; do stop_node "$i" "${pids[$i]}"; done
  pid="$(haproxy_pid)"
  [ -z "$pid" ] || terminate "$pid" haproxy
  rm -f "$run/haproxy.pid"
}

cmd_status() {
  require_cluster
  local i pid lb fmt='%-6s %-8s %-8s %-8s %-17s %-7s %-8s %-5s %-8s %s\n' eps=()
  lb="$(haproxy_pid)"
  # shellcheck disable=SC2059
  printf "$fmt" NODE PID READYZ HAPROXY MEMBER LEADER LEARNER TERM APPLIED ERRORS
  for i in "${!names[@]}"; do
    pid="$(node_pid "$i")"
    local r=- id=- is_leader=- learner=- term=- applied=- errors="" lb_view=-
    [ -z "$lb" ] || lb_view="$(lb_state "${names[$i]}")"
    if [ -n "$pid" ]; then
      eps+=("$(client_ep "$i")")
      if ready "$i"; then r=ok; else r=failing; fi
      read -r id is_leader learner term _ applied errors < <(store_status "$i" || true) || id=unreachable
    fi
    # shellcheck disable=SC2059
    printf "$fmt" "${names[$i]}" "${pid:-down}" "$r" "$lb_view" "$id" "$is_leader" "$learner" "$term" "$applied" "$errors"
  done
  echo
  # Only the running nodes' stores: etcdctl spends its whole timeout on
  # the others, and prints its retries as JSON on stderr.
  local out
  if [ "${#eps[@]}" -eq 0 ]; then
    echo "member list: no node runs"
  elif out="$(etcdctl_at "$(IFS=,; echo "${eps[*]}")" member list -w table 2>&1)"; then
    echo "$out"
  else
    echo "member list: no node answers ($(grep -v '^{' <<< "$out" | tail -n 1))"
  fi
  if [ -n "$lb" ]; then echo "haproxy: pid $lb on 127.0.0.1:$LB_PORT"; else echo "haproxy: not running"; fi
  echo "kubeconfig: $dir/admin.kubeconfig"
}

# live_endpoint [EXCEPT]: the etcd endpoint of a ready node other than EXCEPT.
live_endpoint() {
  local i
  for i in "${!names[@]}"; do
    [ "$i" != "${1:-}" ] || continue
    if ready "$i"; then
      client_ep "$i"
      return
    fi
  done
  die "no ready node${1:+ besides ${names[$1]}}"
}

cmd_rolling_restart() {
  require_cluster
  bin="$(apiserver_bin)"
  local i order=() l
  for i in "${!names[@]}"; do
    ready "$i" || die "${names[$i]} is not ready; a rolling restart starts from a healthy cluster (see status)"
  done
  # Followers first and the leader last: one leader change instead of up
  # to three.
  l="$(leader_index)"
  for i in "${!names[@]}"; do [ "$i" = "$l" ] || order+=("$i"); done
  [ -z "$l" ] || order+=("$l")
  for i in "${order[@]}"; do
    echo "== ${names[$i]}"
    stop_node "$i"
    launch "$i"
    wait_ready "$i"
    wait_caught_up "$i"
    [ -z "$(haproxy_pid)" ] || wait_lb_up "$i"
  done
  echo "rolling restart done"
}

# member_id ENDPOINT PEER_URL: the hex ID of the member with that peer URL.
member_id() {
  etcdctl_at "$1" member list -w simple | awk -F', ' -v u="$2" '$4 == u || index($4, u ",") == 1 { print $1 }'
}

cmd_replace() {
  require_cluster
  check_config
  local i ep id out ic
  i="$(index "$1")"
  bin="$(apiserver_bin)"
  ep="$(live_endpoint "$i")"
  id="$(member_id "$ep" "$(peer_url "$i")")"
  if [ -n "$id" ]; then
    etcdctl_at "$ep" member remove "$id"
  else
    echo "${names[$i]} ($(peer_url "$i")) is not a member; adding it"
  fi
  stop_node "$i"
  rm -rf "$dir/data/${names[$i]}"
  echo "wiped $dir/data/${names[$i]}"
  # The member to remove might have been the leader: the add waits for the
  # new one.
  local deadline=$((SECONDS + start_timeout))
  until out="$(etcdctl_at "$ep" member add "${names[$i]}" --peer-urls="$(peer_url "$i")" --learner 2>&1)"; do
    [ "$SECONDS" -lt "$deadline" ] || die "member add failed: $out"
    sleep 0.5
  done
  echo "$out"
  ic="$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' <<< "$out")"
  id="$(awk '/^Member/ {print $2; exit}' <<< "$out")"
  { [ -n "$ic" ] && [ -n "$id" ]; } || die "cannot read member add's answer"
  write_args "$i" existing "$ic"
  launch "$i"
  # etcd refuses to promote a learner that is not in sync with the leader.
  until out="$(etcdctl_at "$ep" member promote "$id" 2>&1)"; do
    [ -n "$(node_pid "$i")" ] || die "${names[$i]} exited; see $run/${names[$i]}.log"
    [ "$SECONDS" -lt "$deadline" ] || die "${names[$i]} did not catch up within ${start_timeout}s: $out"
    sleep 0.5
  done
  echo "$out"
  wait_ready "$i"
  wait_caught_up "$i"
  [ -z "$(haproxy_pid)" ] || wait_lb_up "$i"
  echo "replaced ${names[$i]}"
}

# check_hosts_nodes SPEC...: refuses a list of nodes (NAME=HOST[,HOST...])
# that cannot form a cluster, before anything is written.
check_hosts_nodes() {
  local n=$# spec name h
  local -A node_seen=() host_owner=()
  if [ "$n" -lt 3 ] || [ $((n % 2)) -eq 0 ]; then
    die "hosts: $n node(s); give an odd number of at least 3 (3, 5 or 7). The store commits a write once a majority (quorum) of its members has it: 2 nodes stop writing when either fails (no better than 1), and an even count survives no more failures than one node fewer (4, like 3, survives one)"
  fi
  for spec in "$@"; do
    name="${spec%%=*}"
    { [ -n "$name" ] && [ "$name" != "$spec" ] && [ -n "${spec#*=}" ]; } || die "--node wants NAME=HOST[,HOST...], got $spec"
    is_name "$name" || die "--node $spec: a node name is letters, digits, '.', '_' and '-', starting with a letter or digit"
    [ -z "${node_seen[$name]+set}" ] || die "hosts: node $name is given twice"
    node_seen[$name]=1
    local -a hs
    IFS=, read -r -a hs <<< "${spec#*=},"
    for h in "${hs[@]}"; do
      [[ "$h" =~ ^[A-Za-z0-9][A-Za-z0-9.:-]*$ ]] || die "--node $spec: '$h' is not a host name or address"
      [ -z "${host_owner[$h]+set}" ] \
        || die "hosts: $h is a host of both ${host_owner[$h]} and $name; each node needs its own (peers and haproxy reach a node at its first host, and its certificates name its hosts)"
      host_owner[$h]="$name"
    done
  done
}

# check_hosts_certs LB_NAMES SPEC...: refuses, before anything is written,
# when a node's certificate from an earlier run names other hosts (or load
# balancer names) than asked now: the env files would name the new hosts
# and the certificates the old ones, and peers would refuse each other.
check_hosts_certs() {
  local lb_names="$1" spec name f crt want have bad=() files=()
  shift
  for spec in "$@"; do
    name="${spec%%=*}"
    local -a hs
    IFS=, read -r -a hs <<< "${spec#*=}"
    for f in apiserver peer; do
      crt="$pki/nodes/$name/$f.crt"
      [ -s "$crt" ] || continue
      if [ "$f" = apiserver ]; then want="$(serving_sans "$lb_names" "${hs[@]}")"; else want="$(san_list "${hs[@]}")"; fi
      have="$(cert_sans "$crt")"
      [ "$have" != "$want" ] || continue
      bad+=("  $crt names $have, not $want")
      files+=("$crt" "$pki/nodes/$name/$f.key")
    done
  done
  [ "${#bad[@]}" -gt 0 ] || return 0
  {
    echo "cluster.sh: hosts: certificates from an earlier run name other hosts than asked now:"
    printf '%s\n' "${bad[@]}"
    echo "Delete them and their keys, then run hosts again to issue them anew with the same CA ($pki/ca.{crt,key}, kept):"
    echo "  rm ${files[*]}"
    case "${files[*]}" in
      */peer.crt*) echo "On a running cluster, a member whose peer address changes also needs etcdctl member update ID --peer-urls=https://NEWHOST:2380." ;;
    esac
  } >&2
  exit 1
}

# cmd_hosts: PKI, per-host env files and haproxy.cfg for real hosts.
cmd_hosts() {
  local specs=() lbs=() lb_port=6443 lb_host=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --node) [ $# -ge 2 ] || bad_usage "--node wants a value"; specs+=("$2"); shift 2 ;;
      --lb-name) [ $# -ge 2 ] || bad_usage "--lb-name wants a value"; lbs+=("$2"); shift 2 ;;
      --lb-port) [ $# -ge 2 ] || bad_usage "--lb-port wants a value"; lb_port="$2"; shift 2 ;;
      --lb-host) [ $# -ge 2 ] || bad_usage "--lb-host wants a value"; lb_host="$2"; shift 2 ;;
      *) bad_usage "hosts: unknown argument $1" ;;
    esac
  done
  { [ "${#specs[@]}" -ge 1 ] && [ "${#lbs[@]}" -ge 1 ]; } || bad_usage "hosts wants --node NAME=HOST[,HOST...] (one per node) and --lb-name NAME"
  [ ! -f "$dir/cluster.env" ] || die "$dir holds a loopback cluster; give the real hosts their own CLUSTER_DIR"
  is_port "$lb_port" || die "--lb-port $lb_port is not a port"
  local secure=6443 peer=2380 client=2379
  check_hosts_nodes "${specs[@]}"
  local spec name first lb
  # haproxy and an apiserver on one host cannot both have :6443.
  for lb in "${lbs[@]}"; do
    for spec in "${specs[@]}"; do
      case ",${spec#*=}," in
        *",$lb,"*) [ "$lb_port" != "$secure" ] || die "hosts: --lb-name $lb is also a host of node ${spec%%=*}, where the apiserver has :$secure; give haproxy another port there (--lb-port 7443)" ;;
      esac
    done
  done
  check_hosts_certs "$(IFS=,; echo "${lbs[*]}")" "${specs[@]}"
  claim_dir
  ensure_pki "$(IFS=,; echo "${lbs[*]}")" "${specs[@]}"
  local out="$dir/hosts" parts=() servers=()
  mkdir -p "$out/lb"
  for spec in "${specs[@]}"; do
    name="${spec%%=*}" first="${spec#*=}" first="${first%%,*}"
    parts+=("$name=https://$first:$peer")
    servers+=("$name=$first:$secure")
  done
  local ic
  ic="$(IFS=,; echo "${parts[*]}")"
  for spec in "${specs[@]}"; do
    name="${spec%%=*}" first="${spec#*=}" first="${first%%,*}"
    mkdir -p "$out/$name"
    rm -rf "$out/$name/pki"
    cp -rp "$pki/nodes/$name" "$out/$name/pki"
    cat > "$out/$name/apiserver.env" << EOF
# /etc/kubers/apiserver.env on $first, for deploy/systemd/kubers-apiserver.service.
# Written by deploy/cluster.sh hosts. To replace this node later (after
# etcdctl member add --learner), set INITIAL_CLUSTER to what member add
# prints and INITIAL_CLUSTER_STATE=existing.
NAME=$name
SECURE_PORT=$secure
BIND_ADDRESS=0.0.0.0
# /readyz fails this long after SIGTERM before the node stops accepting:
# longer than the load balancer's 3 s to take it out.
SHUTDOWN_DELAY_DURATION=5s
PKI_DIR=/etc/kubers/pki
ETCD_LISTEN_CLIENT_URL=http://127.0.0.1:$client
ETCD_LISTEN_PEER_URL=https://0.0.0.0:$peer
INITIAL_ADVERTISE_PEER_URLS=https://$first:$peer
INITIAL_CLUSTER=$ic
INITIAL_CLUSTER_STATE=new
# More apiserver flags, split on spaces. The ServiceAccount key pair is in
# PKI_DIR (sa.key, sa.pub); the apiserver takes no service-account flags yet.
EXTRA_ARGS=
EOF
  done
  cp -p "$pki/ca.crt" "$out/lb/kubers-ca.crt"
  # A whole config for Debian's haproxy service, which runs it as root
  # unless told otherwise (Debian's own haproxy.cfg says user haproxy).
  # Without noreuseport: the service's reload starts the new process while
  # the old one still has the port.
  haproxy_cfg "*:$lb_port" /etc/haproxy/kubers-ca.crt "/dev/log local0" "" "user haproxy;group haproxy" "${servers[@]}" > "$out/lb/haproxy.cfg"
  write_kubeconfig "$out/admin.kubeconfig" "https://${lbs[0]}:$lb_port"
  # Where a release build of this checkout puts the binary.
  local release=target/release/apiserver t
  if command -v cargo > /dev/null 2>&1 \
    && t="$(cd "$here" && cargo metadata --format-version 1 --no-deps 2> /dev/null | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')" \
    && [ -n "$t" ]; then
    release="$t/release/apiserver"
  fi
  echo
  echo "Per host (the apiserver binary, the unit, its env file and PKI);"
  echo "build the binary first: (cd $here && cargo build --release --bin apiserver)"
  echo "(a release build compiles RocksDB in release mode too: 15-30 minutes the first time)"
  for spec in "${specs[@]}"; do
    name="${spec%%=*}" first="${spec#*=}" first="${first%%,*}"
    cat << EOF

# $name ($first)
scp $release root@$first:/usr/local/bin/apiserver
scp $here/deploy/systemd/kubers-apiserver.service root@$first:/etc/systemd/system/
ssh root@$first 'mkdir -p /etc/kubers && useradd --system --no-create-home --shell /usr/sbin/nologin kubers || true'
scp -r $out/$name/pki $out/$name/apiserver.env root@$first:/etc/kubers/
ssh root@$first 'chown -R kubers: /etc/kubers/pki && chmod 600 /etc/kubers/pki/*.key && systemctl daemon-reload && systemctl enable --now kubers-apiserver'
# (without systemd, the same as one command:)
#   /usr/local/bin/apiserver $(node_flags "$name" /var/lib/kubers /etc/kubers/pki 0.0.0.0 "$secure" "http://127.0.0.1:$client" "https://0.0.0.0:$peer" "https://$first:$peer" "$ic" new 5s | tr '\n' ' ')
EOF
  done
  local lb_ssh="${lb_host:-LB_HOST}"
  echo
  echo "# the load balancer: haproxy on $lb_ssh, from Debian's haproxy package."
  if [ -z "$lb_host" ]; then
    echo "# LB_HOST: substitute the machine that runs haproxy, as ssh reaches it (or run"
    echo "# hosts again with --lb-host): ${lbs[0]} is the name clients use, which may"
    echo "# name a virtual IP or a machine you cannot ssh to."
  fi
  cat << EOF
# haproxy.cfg is a whole haproxy config (global, defaults, frontend, backend).
# It goes to /etc/haproxy/kubers.cfg and /etc/default/haproxy points the
# service at it: Debian's /etc/haproxy/haproxy.cfg stays as it was but is
# no longer read. On a haproxy that serves anything else, instead append
# the defaults, frontend and backend sections of kubers.cfg to your
# haproxy.cfg (and the ca-file it names).
scp $out/lb/haproxy.cfg root@$lb_ssh:/etc/haproxy/kubers.cfg
scp $out/lb/kubers-ca.crt root@$lb_ssh:/etc/haproxy/
ssh root@$lb_ssh 'grep -qx CONFIG=/etc/haproxy/kubers.cfg /etc/default/haproxy || echo CONFIG=/etc/haproxy/kubers.cfg >> /etc/default/haproxy; systemctl restart haproxy'

# then, anywhere:
export KUBECONFIG=$out/admin.kubeconfig
EOF
}

# cmd_clean [--delete-hosts-pki]: down, then delete $dir; only a dir that
# cluster.sh made, and one with the files of real hosts only when asked
# twice (the flag).
cmd_clean() {
  local hosts_too=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --delete-hosts-pki) hosts_too=1; shift ;;
      *) bad_usage "clean: unknown argument $1" ;;
    esac
  done
  if [ ! -e "$dir" ]; then
    echo "nothing to clean: $dir does not exist"
    return
  fi
  owned || die "refusing to delete $dir: it has no $marker_file or cluster.env, so cluster.sh did not make it (is CLUSTER_DIR right?). Delete it yourself if it is a cluster dir from an older cluster.sh"
  if [ -d "$dir/hosts" ] && [ "$hosts_too" = 0 ]; then
    die "refusing to delete $dir: it holds the PKI of real hosts (hosts/, and pki/ca.key, the CA key every node's certificate chains to: without it no certificate can be issued for them again, and a new CA means new certificates on every node and a new kubeconfig for every user). Keep a copy of $pki, then: deploy/cluster.sh clean --delete-hosts-pki"
  fi
  [ ! -f "$dir/cluster.env" ] || cmd_down
  rm -rf "$dir"
  echo "removed $dir"
}

# no_args COMMAND ARG...: refuses any argument to COMMAND.
no_args() {
  local c="$1"
  shift
  [ $# -eq 0 ] || bad_usage "$c takes no arguments, got: $*"
}

# one_node COMMAND ARG...: refuses anything but one node name.
one_node() {
  local c="$1"
  shift
  if [ $# -ne 1 ] || [ -z "$1" ]; then
    bad_usage "$c wants one node name${1:+, got: $*}"
  fi
}

cmd="${1:-}"
[ $# -eq 0 ] || shift
case "$cmd" in
  pki) cmd_pki "$@" ;;
  up) no_args up "$@"; cmd_up ;;
  down) no_args down "$@"; cmd_down ;;
  clean) cmd_clean "$@" ;;
  status) no_args status "$@"; cmd_status ;;
  start) one_node start "$@"; cmd_start "$1" ;;
  stop) one_node stop "$@"; cmd_stop "$1" ;;
  rolling-restart) no_args rolling-restart "$@"; cmd_rolling_restart ;;
  replace) one_node replace "$@"; cmd_replace "$1" ;;
  hosts) cmd_hosts "$@" ;;
  '' | -h | --help | help) usage ;;
  *) bad_usage "unknown command $cmd" ;;
esac
