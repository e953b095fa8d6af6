# Device-side set-up for the lent H200 (no network), sourced from the repository root by call*.sh:
# the FlashInfer 0.7.4 + CuTe DSL + fla-core bundle (.gpu, scripts/pack_gpu_deps.sh), the FlashInfer 0.7.2.post1
# overlay (.gpu-fi072, FI_OVERLAY=0.7.2.post1), and SGLang 0.5.23's kernel folders (.sgl: its fla/ and linear/
# attention packages and METADATA, 1.1 MB of the 39 MB wheel).
. .gpu/gpu_env.sh
mkdir -p /tmp/sgl && tar -xJf .sgl/sglang0523.tar.xz -C /tmp/sgl
export PYTHONPATH=$PWD:$PYTHONPATH:/tmp/sgl PYTHONUNBUFFERED=1
. .gpu-fi072/use.sh
R=/tmp/r && rm -rf $R && mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $R/machine.txt
python3 -c "import torch, triton, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, \
'hypothesis', hypothesis.__version__, 'sm', torch.cuda.get_device_capability())" >> $R/machine.txt 2>&1
# pack: everything under $R as one archive ($OUT returns at most 8 files)
pack() { tar -C /tmp -cJf $OUT/results.tar.xz r; ls -la $OUT; }
