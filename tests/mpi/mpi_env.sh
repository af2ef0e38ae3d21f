# Sourced by the MPI test scripts: exits 77 (skipped) when the mpirun given
# as $1 is empty or absent, else sets the environment that their runs share.
# Open MPI refuses root unless told (CI runs as root); the runs oversubscribe
# the few cores of a CI machine; one thread a rank keeps two ranks from
# fighting over them. Open MPI's own allocations outlive MPI_Finalize, and a
# broken world abandons its buffers to MPI on purpose: leak reports there
# would not be ours.
if [ -z "${1:-}" ] || ! command -v "$1" >/dev/null 2>&1; then
  echo "mpirun not found: skipped"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_base_warn_component_unused=0
export LT_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
