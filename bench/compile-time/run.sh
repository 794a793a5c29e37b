#!/usr/bin/env bash
# Measures what #[tool] costs at compile time.
#
# Generates three crates of 200 functions each, identical but for the
# attribute: `with_tool` has #[tool] on every function, `with_targets`
# has #[tool(targets(...))] naming all seven provider targets (each
# parameter checked at compile time), `plain` has none. `plain_linked` is
# `plain` whose binary also links kesoku's registry (as every binary with
# a tool does): the part of the cost that is the macro's own.
# Both depend on kesoku (so dependencies are equal and prebuilt), and for
# each it times:
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

gen() { # gen NAME ATTR
  local name=$1 attr=$2 dir="$work/$1"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
kesoku = { path = "$root" }
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
      if [ "$name" = plain_linked ]; then
        echo 'fn main() { println!("{}", ALL.len() + kesoku::default_registry().len()); }'
      else
        echo 'fn main() { println!("{}", ALL.len()); }'
      fi
    fi
  } >"$dir/src/main.rs"
}

gen with_tool "#[tool]"
gen with_targets "#[tool(targets(anthropic, anthropic_structured, openai, openai_strict, gemini, gemini_json_schema, mcp))]"
gen plain ""
gen plain_linked ""

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

read -r tool_clean tool_inc < <(measure with_tool)
read -r targets_clean targets_inc < <(measure with_targets)
read -r plain_clean plain_inc < <(measure plain)
read -r linked_clean linked_inc < <(measure plain_linked)
test "$("$work/target/debug/with_tool")" = "$n" || { echo "with_tool did not register $n tools" >&2; exit 1; }
test "$("$work/target/debug/with_targets")" = "$n" || { echo "with_targets did not register $n tools" >&2; exit 1; }
test "$("$work/target/debug/plain")" = "$n" || { echo "plain did not build $n functions" >&2; exit 1; }
test "$("$work/target/debug/plain_linked")" = "$n" || { echo "plain_linked did not build $n functions" >&2; exit 1; }

printf '\n%d functions, median of %d runs, debug build, %s cores\n' "$n" "$runs" "$(nproc)"
printf '%-22s %10s %10s %8s %12s %8s\n' "" "plain" "#[tool]" "ratio" "+targets(7)" "ratio"
printf '%-22s %9.2fs %9.2fs %7.2fx %11.2fs %7.2fx\n' "clean build" "$plain_clean" "$tool_clean" "$(echo "$tool_clean / $plain_clean" | bc -l)" "$targets_clean" "$(echo "$targets_clean / $plain_clean" | bc -l)"
printf '%-22s %9.2fs %9.2fs %7.2fx %11.2fs %7.2fx\n' "edit one fn, rebuild" "$plain_inc" "$tool_inc" "$(echo "$tool_inc / $plain_inc" | bc -l)" "$targets_inc" "$(echo "$targets_inc / $plain_inc" | bc -l)"
printf '\nthe macro'"'"'s own cost, against plain functions linking kesoku (%.2fs clean, %.2fs rebuild):\n' "$linked_clean" "$linked_inc"
printf '%-22s %8.2fx %8.2fx\n' "#[tool]" "$(echo "$tool_clean / $linked_clean" | bc -l)" "$(echo "$tool_inc / $linked_inc" | bc -l)"
printf '%-22s %8.2fx %8.2fx\n' "+targets(7)" "$(echo "$targets_clean / $linked_clean" | bc -l)" "$(echo "$targets_inc / $linked_inc" | bc -l)"
