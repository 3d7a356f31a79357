import sys, torch, json
sys.path.insert(0, '.')
import kernels.flash_attention as fa
from kernels import heuristics as hx
from iomodel.bench.timing import do_bench_interleaved
from iomodel.bench.backends import attention_call
from iomodel.bench.inputs import dense_inputs
out=[]
for B,H,N,d,dt,causal in [(2,16,8192,128,torch.bfloat16,False),(2,16,8192,128,torch.bfloat16,True),(8,16,2048,128,torch.bfloat16,True),(4,16,4096,64,torch.float16,False),(16,16,1024,128,torch.bfloat16,True)]:
    g=torch.Generator(device='cuda').manual_seed(0)
    q,k,v=(torch.randn(B,H,N,d,device='cuda',generator=g,dtype=dt) for _ in range(3))
    _,_,cfg=fa.flash_attention(q,k,v,causal,return_config=True)
    dts='bf16' if dt==torch.bfloat16 else 'fp16'
    fns={'autotuned':(lambda: fa.flash_attention(q,k,v,causal))}
    for c in hx.prefill_candidates(d,dts,causal,'prefill-tma'):
        kc=c.config('prefill-tma')
        fns[f"{c.block_m}x{c.block_n}w{c.num_warps}s{c.num_stages}{'r' if c.tile_order=='reverse' else ''}{'ws' if c.warp_specialize else ''}"]=(lambda kc=kc: fa.flash_attention(q,k,v,causal,config=kc))
    fns['cudnn']=attention_call('sdpa-cudnn',dense_inputs(q,k,v,causal))
    s=do_bench_interleaved(fns,rounds=3,warmup_ms=10,rep_ms=60)
    med={n:sorted(x)[1]*1e3 for n,x in s.items()}
    row=dict(shape=[B,H,N,d,dts,causal],autotuned=cfg.to_dict(),median_ms=med)
    out.append(row)
    print(row['shape'],'picked',cfg.block_m,cfg.block_n,cfg.num_warps,cfg.num_stages,cfg.tile_order,cfg.warp_specialize,{n:round(med['cudnn']/t,3) for n,t in med.items()},flush=True)
json.dump(out,open(sys.argv[1],'w'),indent=1)
