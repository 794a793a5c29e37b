#!/usr/bin/env python3
"""How close kesoku's token estimate is to what providers counted.

Reads VCR cassettes recorded against the real Anthropic, OpenAI and Gemini
APIs (for example pydantic-ai's `tests/**/cassettes`, MIT; measured on
4fda38988 of 2026-08-22), takes each
request body with the usage its response reported, and compares:

- the count over kesoku's raw estimate, for requests of 1,000 tokens or
  more (what a context budget is about);
- the error of the estimate calibrated by the previous request of the same
  conversation (its count over its estimate), as the agent calibrates.

Only text and tool conversations are measured: media, documents, the
providers' own tools and cached content are counted by rules of their own.

The estimate mirrors `kesoku-agent/src/agent/compaction.rs` (`estimate`):
a token per four bytes of text, of a call's name and arguments, of a
result, of a tool's name, description and schema and of the instructions;
8 per message (a wire block here); 1,600 per media block.

    python3 tools/estimate/measure.py PATH_TO_CASSETTES
"""
import sys, os, json, yaml, glob, statistics
MEDIA=1600; MSG=8
def jl(v): return len(json.dumps(v, separators=(',',':'), ensure_ascii=False).encode())
def tb(s): return len(s.encode()) if isinstance(s,str) else jl(s)
def est_anthropic(b):
    raw=0
    sysp=b.get('system')
    if isinstance(sysp,str): raw+=tb(sysp)//4
    elif isinstance(sysp,list): raw+=sum(tb(x.get('text','')) for x in sysp)//4
    for t in b.get('tools',[]) or []:
        raw+=(tb(t.get('name',''))+tb(t.get('description',''))+jl(t.get('input_schema',{})))//4
    for m in b.get('messages',[]):
        c=m['content']
        if isinstance(c,str): raw+=tb(c)//4+MSG; continue
        for blk in c:
            ty=blk.get('type'); byts=0; media=0
            if ty=='text': byts=tb(blk['text'])
            elif ty=='tool_use': byts=tb(blk['name'])+jl(blk.get('input',{}))
            elif ty=='tool_result':
                cc=blk.get('content','')
                if isinstance(cc,str): byts=tb(cc)
                else:
                    for x in cc:
                        if x.get('type')=='text': byts+=tb(x['text'])
                        else: media+=MEDIA
            elif ty in ('image','document'): media+=MEDIA
            elif ty in ('thinking','redacted_thinking'): byts=tb(blk.get('thinking',blk.get('data','')))+tb(blk.get('signature',''))
            else: byts=jl(blk)
            raw+=byts//4+media+MSG
    return raw
def est_openai(b):
    raw=0
    for t in b.get('tools',[]) or []:
        f=t.get('function',{})
        raw+=(tb(f.get('name',''))+tb(f.get('description',''))+jl(f.get('parameters',{})))//4
    for m in b.get('messages',[]):
        c=m.get('content'); byts=0; media=0
        if isinstance(c,str): byts+=tb(c)
        elif isinstance(c,list):
            for x in c:
                if x.get('type')=='text': byts+=tb(x['text'])
                else: media+=MEDIA
        for tc in m.get('tool_calls',[]) or []:
            byts+=tb(tc['function']['name'])+tb(tc['function']['arguments'])
            raw+=MSG
        raw+=byts//4+media+MSG
    return raw
def est_gemini(b):
    raw=0
    si=b.get('systemInstruction') or b.get('system_instruction')
    if si: raw+=sum(tb(p.get('text','')) for p in si.get('parts',[]))//4
    for t in b.get('tools',[]) or []:
        if not isinstance(t,dict): continue
        for f in t.get('functionDeclarations',[]) or t.get('function_declarations',[]) or []:
            raw+=(tb(f.get('name',''))+tb(f.get('description',''))+jl(f.get('parameters',f.get('parametersJsonSchema',{}))))//4
    for c in b.get('contents',[]):
        for p in c.get('parts',[]):
            byts=0; media=0
            if 'text' in p: byts=tb(p['text'])
            elif 'functionCall' in p: byts=tb(p['functionCall']['name'])+jl(p['functionCall'].get('args',{}))
            elif 'functionResponse' in p: byts=jl(p['functionResponse'].get('response',{}))
            elif 'inlineData' in p or 'fileData' in p: media=MEDIA
            if 'thoughtSignature' in p: byts+=tb(p['thoughtSignature'])
            raw+=byts//4+media+MSG
    return raw
def actual(provider, r):
    u=r.get('usage') or r.get('usageMetadata') or {}
    if provider=='anthropic':
        if 'input_tokens' not in u: return None
        return u['input_tokens']+(u.get('cache_read_input_tokens') or 0)+(u.get('cache_creation_input_tokens') or 0)
    if provider=='openai':
        return u.get('prompt_tokens')
    return u.get('promptTokenCount')
rows=[]; calib=[]
for path in glob.glob(sys.argv[1]+'/**/*.yaml', recursive=True):
    try: d=yaml.safe_load(open(path))
    except Exception: continue
    prev=None
    for it in d.get('interactions',[]) or []:
        rq=it.get('request',{}); rs=it.get('response',{})
        uri=rq.get('uri','')
        b=rq.get('parsed_body'); r=rs.get('parsed_body')
        if not isinstance(b,dict) or not isinstance(r,dict): continue
        try:
          if 'anthropic.com/v1/messages' in uri and 'count_tokens' not in uri: p='anthropic'; e=est_anthropic(b)
          elif 'openai.com/v1/chat/completions' in uri: p='openai'; e=est_openai(b)
          elif 'generateContent' in uri and 'googleapis' in uri: p='gemini'; e=est_gemini(b)
          else: continue
        except Exception as ex:
          continue
        a=actual(p,r)
        if not a: continue
        txt=json.dumps(b)
        # Text and tool conversations only: media, documents, the
        # provider's own tools and cached content are counted by rules of
        # their own, which calibration cannot know from one ratio.
        if any(k in txt for k in ('"image"','"document"','inlineData','fileData','inline_data','file_data','image_url','mime_type','mimeType','"file"','input_audio','cachedContent','cached_content','web_search','code_execution','web_fetch','"server_tool','mcp_servers','"container"','tool_search','memory_20')):
            prev=None; continue
        tools=b.get('tools') or []
        if p=='anthropic' and any(isinstance(t,dict) and 'type' in t and t.get('type')!='custom' for t in tools):
            prev=None; continue
        msgs=b.get('messages') or b.get('contents') or []
        first=json.dumps(msgs[:1])
        rows.append((p,e,a,path))
        if prev and prev[0]==p and prev[1]>=1000 and e>=1000 and prev[3]==first and len(msgs)>prev[4]:
            ratio=prev[2]/prev[1]
            calib.append((p, e*ratio, a))
        prev=(p,e,a,first,len(msgs))
for p in ['anthropic','openai','gemini']:
    rs=[(e,a) for (q,e,a,_) in rows if q==p and a>=1000]
    allr=[(e,a) for (q,e,a,_) in rows if q==p]
    if rs:
        ratios=[a/e for e,a in rs]
        print(p, 'requests', len(allr), '>=1000 tokens:', len(rs), 'count/estimate median %.2f min %.2f max %.2f'%(statistics.median(ratios),min(ratios),max(ratios)))
    cs=[(e,a) for (q,e,a) in calib if q==p]
    if cs:
        errs=[abs(e-a)/a for e,a in cs]
        print('  calibrated by the previous request:', len(cs), 'median error %.1f%% max %.1f%%'%(100*statistics.median(errs),100*max(errs)))
