# Pattern of huggingface/transformers examples/pytorch/text-classification/run_glue_no_trainer.py (older
# version): Accelerate, loaders without workers, accumulation by `step % k` without accelerator.accumulate.
import math

from accelerate import Accelerator
from torch.utils.data import DataLoader


def train(args, model, optimizer, scheduler, train_set, eval_set, collate):
    accelerator = Accelerator()
    train_loader = DataLoader(train_set, shuffle=True, collate_fn=collate, batch_size=args.batch)
    eval_loader = DataLoader(eval_set, collate_fn=collate, batch_size=args.batch)
    model, optimizer, train_loader, eval_loader = accelerator.prepare(
        model, optimizer, train_loader, eval_loader
    )
    updates = math.ceil(len(train_loader) / args.accum) * args.epochs
    done = 0
    for _epoch in range(args.epochs):
        model.train()
        for step, batch in enumerate(train_loader):
            loss = model(**batch).loss / args.accum
            accelerator.backward(loss)
            if step % args.accum == 0 or step == len(train_loader) - 1:
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                done += 1
            if done >= updates:
                break
        model.eval()
        for batch in eval_loader:
            predictions = model(**batch).logits.argmax(dim=-1)
            accelerator.gather(predictions)
    accelerator.wait_for_everyone()
    accelerator.unwrap_model(model).save_pretrained(args.out, save_function=accelerator.save)
