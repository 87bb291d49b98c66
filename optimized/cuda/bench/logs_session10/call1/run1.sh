bash optimized/cuda/bench/pending_device_run.sh   # carry .cudabin .tcache; bins at df78f50
