"""GPU Training Workbook helpers."""
