import sys, struct, hashlib
def sections(path):
    b=open(path,'rb').read()
    shoff=struct.unpack_from('<Q',b,0x28)[0]; shentsize,shnum,shstrndx=struct.unpack_from('<HHH',b,0x3A)
    hdr=lambda i: struct.unpack_from('<IIQQQQIIQQ',b,shoff+i*shentsize)
    strtab=hdr(shstrndx); so=strtab[4]
    out={}
    for i in range(shnum):
        h=hdr(i); name=b[so+h[0]:b.index(b'\0',so+h[0])].decode()
        if name.startswith('.text') or name.startswith('.nv.info') or name.startswith('.nv.shared') or name.startswith('.nv.constant'):
            data=b[h[4]:h[4]+h[5]] if h[1]!=8 else b''
            out[name]=(h[5],hashlib.md5(data).hexdigest())
    return out
for p in sys.argv[1:]:
    s=sections(p); print(p.split('/')[-1], hashlib.md5(repr(sorted(s.items())).encode()).hexdigest()[:12], len(s))
