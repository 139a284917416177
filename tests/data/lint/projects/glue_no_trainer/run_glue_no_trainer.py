# Pattern of huggingface/transformers examples/pytorch/text-classification/run_glue_no_trainer.py (current):
# Accelerate with accelerator.accumulate, rows tokenized ahead by datasets .map(), loaders without workers.
import argparse
import math

import torch
from accelerate import Accelerator
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding


def parse_args():
    parser = argparse.ArgumentParser(
        description="Finetune a transformers model on a text classification task"
    )
    parser.add_argument("--model", type=str, required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--accum", type=int, default=1, help="Number of updates steps to accumulate.")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--with_tracking", action="store_true")
    parser.add_argument("--checkpointing_steps", type=str, default=None)
    return parser.parse_args()


def main():
    args = parse_args()
    accelerator = Accelerator(gradient_accumulation_steps=args.accum)
    raw = load_dataset("glue", "mrpc")
    tokenizer = AutoTokenizer.from_pretrained(args.model)

    def preprocess(examples):
        return tokenizer(examples["sentence1"], examples["sentence2"], truncation=True, max_length=128)

    with accelerator.main_process_first():
        processed = raw.map(preprocess, batched=True, remove_columns=raw["train"].column_names)
    train_dataset = processed["train"]
    eval_dataset = processed["validation"]
    collator = DataCollatorWithPadding(tokenizer)
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=collator, batch_size=args.batch)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=collator, batch_size=args.batch)
    model = AutoModelForSequenceClassification.from_pretrained(args.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model, optimizer, train_dataloader, eval_dataloader = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader
    )
    max_steps = args.epochs * math.ceil(len(train_dataloader) / args.accum)
    completed_steps = 0
    for _epoch in range(args.epochs):
        model.train()
        total_loss = 0
        for _step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                if args.with_tracking:
                    total_loss += loss.detach().float()
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed_steps += 1
            if args.checkpointing_steps and completed_steps % int(args.checkpointing_steps) == 0:
                accelerator.save_state(f"step_{completed_steps}")
            if completed_steps >= max_steps:
                break
        model.eval()
        for batch in eval_dataloader:
            with torch.no_grad():
                predictions = model(**batch).logits.argmax(dim=-1)
            accelerator.gather_for_metrics(predictions)
    accelerator.end_training()


if __name__ == "__main__":
    main()
