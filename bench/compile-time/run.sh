#!/usr/bin/env bash
# Measures what #[tool] costs at compile time.
#
# Generates crates of 200 functions each, identical but for the attribute
# and what they link:
#   - `plain`: no attribute, no kesoku;
#   - `with_tool`: #[tool] on every function, on kesoku without default
#     features (the tool system alone, as a crate of tools depends on it);
#   - `with_targets`: the same with #[tool(targets(...))] naming all seven
#     provider targets (each parameter checked at compile time);
#   - `full_tool`: #[tool] on kesoku with its default features (the agent,
#     the backends, SQLite, MCP), as in a binary that runs an agent;
#   - `lean_plain`, `full_plain`: `plain` whose binary also links kesoku's
#     registry, without and with its default features: the floor of such
#     binaries, before any macro.
# Each binary reaches every function (the registry, or a table of function
# pointers), so each compiles them all. For each crate it times:
#   - a clean build of the crate itself (dependencies already built);
#   - an incremental rebuild after editing one function's body.
# Each figure is the median of RUNS runs (default 5). Debug profile.
#
# Usage: bench/compile-time/run.sh [RUNS]
set -euo pipefail
runs=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work="$here/work"
n=200

rm -rf "$work"
mkdir -p "$work"

gen() { # gen NAME ATTR KESOKU_DEPENDENCY
  local name=$1 attr=$2 dep=$3 dir="$work/$1"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
kesoku = { path = "$root"$dep }
serde = { version = "1", features = ["derive"] }

[workspace]
TOML
  # The project's own dependency versions.
  cp "$root/Cargo.lock" "$dir/"
  {
    echo "#![allow(dead_code, clippy::all)]"
    [ -n "$attr" ] && echo "use kesoku::tool;"
    for i in $(seq 1 $n); do
      cat <<RS
/// Computes value number $i from its inputs.
///
/// # Arguments
/// * \`a\` - The first operand.
/// * \`b\` - The second operand.
/// * \`label\` - A label for the result.
/// * \`scale\` - An optional scale.
$attr
pub fn compute_$i(a: i64, b: u32, label: String, scale: Option<f64>) -> Result<String, String> {
    let v = (a + i64::from(b) + $i) as f64 * scale.unwrap_or(1.0);
    if v.is_nan() { return Err("not a number".into()); }
    Ok(format!("{label}: {v}"))
}

RS
    done
    if [ -n "$attr" ]; then
      echo 'fn main() { println!("{}", kesoku::default_registry().len()); }'
    else
      # Name every function, so the plain crate compiles them all too
      # (a binary does not build functions nothing reaches).
      echo 'type F = fn(i64, u32, String, Option<f64>) -> Result<String, String>;'
      echo "static ALL: [F; $n] = [$(seq -s, -f 'compute_%g' 1 $n)];"
      if [ "$name" = lean_plain ] || [ "$name" = full_plain ]; then
        echo 'fn main() { println!("{}", ALL.len() + kesoku::default_registry().len()); }'
      else
        echo 'fn main() { println!("{}", ALL.len()); }'
      fi
    fi
  } >"$dir/src/main.rs"
}

lean=", default-features = false"
gen plain "" "$lean"
gen with_tool "#[tool]" "$lean"
gen with_targets "#[tool(targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp))]" "$lean"
gen full_tool "#[tool]" ""
gen lean_plain "" "$lean"
gen full_plain "" ""

export CARGO_TARGET_DIR="$work/target"
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

measure() { # measure NAME -> "clean incremental"
  local name=$1 dir="$work/$1" cleans=() incs=()
  (cd "$dir" && cargo build -q)  # dependencies, once
  for _ in $(seq 1 "$runs"); do
    (cd "$dir" && cargo clean -q -p "$name")
    local t0; t0=$(now)
    (cd "$dir" && cargo build -q)
    cleans+=("$(echo "$(now) - $t0" | bc)")
    # Edit one function body, then rebuild.
    sed -i "s/(a + i64::from(b) + 100)/(a + i64::from(b) + 100 + 0)/; t; s/(a + i64::from(b) + 100 + 0)/(a + i64::from(b) + 100)/" "$dir/src/main.rs"
    t0=$(now)
    (cd "$dir" && cargo build -q)
    incs+=("$(echo "$(now) - $t0" | bc)")
  done
  printf '%s %s\n' "$(printf '%s\n' "${cleans[@]}" | median)" "$(printf '%s\n' "${incs[@]}" | median)"
}

names=(plain with_tool with_targets full_tool lean_plain full_plain)
declare -A clean inc
for name in "${names[@]}"; do
  read -r "clean[$name]" "inc[$name]" < <(measure "$name")
  test "$("$work/target/debug/$name")" = "$n" || { echo "$name did not build $n functions" >&2; exit 1; }
done

ratio() { echo "$1 / $2" | bc -l; }
row() { # row LABEL NAME BASE
  printf '%-44s %6.2fs %6.2fx %8.2fs %6.2fx\n' "$1" "${clean[$2]}" "$(ratio "${clean[$2]}" "${clean[$3]}")" "${inc[$2]}" "$(ratio "${inc[$2]}" "${inc[$3]}")"
}
printf '\n%d functions, median of %d runs, debug build, %s cores\n' "$n" "$runs" "$(nproc)"
printf '%-44s %7s %7s %9s %7s\n' "" "clean" "ratio" "rebuild" "ratio"
printf '%-44s %6.2fs %7s %8.2fs\n' "plain functions" "${clean[plain]}" "" "${inc[plain]}"
row "#[tool], kesoku without default features" with_tool plain
row "  + targets(7)" with_targets plain
row "#[tool], kesoku's default features" full_tool plain
printf '\nagainst plain functions linking kesoku'"'"'s registry, the same features (%.2fs / %.2fs without defaults, %.2fs / %.2fs with):\n' "${clean[lean_plain]}" "${inc[lean_plain]}" "${clean[full_plain]}" "${inc[full_plain]}"
row "#[tool], kesoku without default features" with_tool lean_plain
row "#[tool], kesoku's default features" full_tool full_plain
